#!/usr/bin/env bash
# The bf16 sweep of both suites on the device, then the GPU tests with the time left.
# Usage (from the repository root): bash kernels/device_sweep.sh OUT_DIR TOTAL_SECONDS
set -u
OUT=${1:?out dir}; TOTAL=${2:-400}
REPO=$(pwd)
START=$(date +%s)
# `pip` and `python` may be different interpreters there: install with `python -m pip`, log what we learn
{ which -a python pip; python -c "import sys; print(sys.executable, sys.version); print(sys.path)"; pip --version;
  python -m pip --version; } > "$OUT/pip.log" 2>&1
python -m pip install --no-deps --no-build-isolation -e . >> "$OUT/pip.log" 2>&1 || echo "pip install failed"
{ python -m pip show -f theodolite | head -30; SP=$(python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])");
  echo "purelib $SP"; ls "$SP" | grep -i -E "theodolite|editable"; cat "$SP"/__editable__*theodolite*.pth;
  (cd /tmp && python -c "import theodolite, theodolite.kernels; print('import ok', theodolite.__file__)"); } >> "$OUT/pip.log" 2>&1
tail -12 "$OUT/pip.log"
RUN=$REPO
if ! (cd /tmp && python -c "import theodolite.kernels.benchmark" 2>/dev/null); then
  # editable install unavailable: a symlinked package tree (run outside the repo so ./theodolite cannot shadow it)
  mkdir -p /tmp/pp && cp -rs "$REPO/theodolite" /tmp/pp/ && for d in kernels probes model profiles reports; do ln -sfn "$REPO/$d" "/tmp/pp/theodolite/$d"; done
  export PYTHONPATH=/tmp/pp; RUN=/tmp; echo "using PYTHONPATH fallback"
fi
cd "$RUN"
export PYTHONUNBUFFERED=1
# host overhead per call: torch.matmul vs gemm() vs the raw launch (devcheck --host)
timeout 60 python -m theodolite.kernels.devcheck /tmp/host --host 2>&1 | grep -E "^host" | grep -E "torch.matmul |gemm|raw" | head -24
cp /tmp/host/host-overhead.json "$OUT/" 2>/dev/null
left() { echo $(( TOTAL - ($(date +%s) - START) )); }
timeout $(( $(left) - 150 )) python -m theodolite bench --shapes llm --dtype bf16 -o "$OUT/bench-llm.json" \
  --budget-s $(( $(left) - 200 )) > "$OUT/llm.log" 2>&1
echo "llm done at $(( $(date +%s) - START ))s rc=$?"; grep -E "precompiled|summary|budget|wrote|Error" "$OUT/llm.log" | head -8
timeout $(( $(left) - 95 )) python -m theodolite bench --shapes random-dev --dtype bf16 -o "$OUT/bench-random-dev.json" \
  --budget-s $(( $(left) - 125 )) > "$OUT/dev.log" 2>&1
echo "random-dev done at $(( $(date +%s) - START ))s"; grep -E "precompiled|summary|budget|wrote|Error" "$OUT/dev.log" | head -8
T=$(( $(left) - 5 ))
if [ "$T" -gt 20 ]; then
  timeout "$T" python -m pytest -q -rs -p no:cacheprovider --rootdir "$REPO" "$REPO/tests/kernels/test_gpu_kernels.py" > "$OUT/gpu-tests.txt" 2>&1
  tail -5 "$OUT/gpu-tests.txt"
fi
grep -E "^\[" "$OUT/llm.log" | head -40
echo "total $(( $(date +%s) - START ))s"
