#!/usr/bin/env bash
# One call on a GPU machine: (optionally) calibrate it, run the GPU tests, then validate the model on
# shape suites with that profile.  Everything lands in OUT; a summary table is printed last.
#
#   bash reports/run_on_device.sh OUT TOTAL_SECONDS [--calibrate [--repeat]] [--tests] [--profile P] SUITE...
#
# --repeat calibrates a second time right after the first (no kernel builds) and prints
# `profile diff` of the two: the repeatability check of the probes issue.
#
# The committed results under reports/results/ and profiles/ were produced by this script
# (one call on an H100 80GB HBM3, one on an H200); see reports/README.md for the calls.
set -u
OUT=${1:?out dir}; TOTAL=${2:?seconds}; shift 2
CALIBRATE=0; REPEAT=0; TESTS=0; PROFILE=""; SUITES=()
while [ $# -gt 0 ]; do
  case "$1" in
    --calibrate) CALIBRATE=1 ;;
    --tests) TESTS=1 ;;
    --repeat) REPEAT=1 ;;
    --profile) PROFILE=$2; shift ;;
    *) SUITES+=("$1") ;;
  esac
  shift
done
START=$(date +%s)
left() { echo $(( TOTAL - ($(date +%s) - START) )); }
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton-cache
# nvMatmulHeuristics (a peer in validation) travels as a wheel in .whl when carried.
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site
fi
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
SLUG=$(python3 -c "import torch; from theodolite.profile.resolve import slug; print(slug(torch.cuda.get_device_name()))")
if [ "$CALIBRATE" = 1 ]; then
  PROFILE="$OUT/$SLUG.h5"
  python3 -m theodolite calibrate -o "$PROFILE" --force --diagnostics "$OUT/diagnostics.json" 2>&1 | tee "$OUT/calibrate.log" | tail -60
  echo "calibrated at $(( $(date +%s) - START ))s"
  if [ "$REPEAT" = 1 ]; then
    python3 -m theodolite calibrate -o "$OUT/repeat.h5" --force --no-builds > "$OUT/calibrate-repeat.log" 2>&1
    python3 -m theodolite profile diff "$PROFILE" "$OUT/repeat.h5" 2>&1 | tee "$OUT/repeat-diff.txt" | tail -45
    echo "repeat calibrated at $(( $(date +%s) - START ))s"
  fi
fi
[ -n "$PROFILE" ] || PROFILE="profiles/$SLUG.h5"
if [ "$TESTS" = 1 ]; then
  timeout 240 python3 -m pytest -q -m gpu -p no:cacheprovider tests > "$OUT/gpu-tests.txt" 2>&1
  echo "gpu tests: $(tail -1 "$OUT/gpu-tests.txt") at $(( $(date +%s) - START ))s"
  grep -E "^(FAILED|ERROR)" "$OUT/gpu-tests.txt" | head -20
fi
N=${#SUITES[@]}
for i in "${!SUITES[@]}"; do
  suite=${SUITES[$i]}
  share=$(( ($(left) - 20) / (N - i) ))
  python3 -m theodolite validate --shapes "$suite" --profile "$PROFILE" --peers fixed,nvmmh \
    --budget-s "$share" -o "$OUT/validate-$suite.json" > "$OUT/validate-$suite.log" 2>&1
  echo "validate $suite rc=$? at $(( $(date +%s) - START ))s"
  tail -25 "$OUT/validate-$suite.log"
done
# logs travel as one archive (few files to copy back from a remote machine)
( cd "$OUT" && tar czf logs.tar.gz --remove-files ./*.log ./*.txt diagnostics.json 2>/dev/null )
echo "total $(( $(date +%s) - START ))s"; ls "$OUT"
