#!/usr/bin/env bash
# One GPU call for theodolite in PyTorch models, within 8 minutes on an H100: the GPU tests of tests/nn (CUDA
# graphs with a split-K pick, torch.compile with inductor, bf16/fp16/fp32 gradients, the fallback, a tiny
# bench-linear), then `theodolite bench-linear` (a Llama-3-8B-sized decoder's 128 projections per pass, F.linear
# against theodolite: eager, CUDA graph, torch.compile; tokens/s; host us per call, eager and inside a compiled
# graph; a profiler summary at M=8; per-projection kernel times with the model's next configs at M 32..512).
# Run from the repository root:
#
#   PYTHONPATH=$PWD bash experiments/bench_linear_gpu.sh $OUT
#
# Writes $OUT/bench-linear-<gpu>.json (commit it as reports/results/bench-linear-<gpu>.json), the GPU tests' log,
# chrome traces of one M=8 pass per side, and prints the ratio table last (with each phase's seconds).
set -u
OUT=${1:?out dir}
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton-cache
GPU=$(python3 -c "import torch; from theodolite.profile.resolve import slug; print(slug(torch.cuda.get_device_name()))")
case "$GPU" in *h100*) GPU=h100 ;; *h200*) GPU=h200 ;; esac
START=$(date +%s)
timeout 200 python3 -m pytest -q -rs -m gpu tests/nn -p no:cacheprovider > "$OUT/tests-nn-$GPU.log" 2>&1
echo "GPU tests of tests/nn ($(($(date +%s) - START)) s): $(tail -1 "$OUT/tests-nn-$GPU.log")"
grep -E "^(FAILED|ERROR|SKIPPED)" "$OUT/tests-nn-$GPU.log" | head -20
timeout $((470 - $(date +%s) + START)) python3 -m theodolite bench-linear --kernel-budget-s 90 \
  --out "$OUT/bench-linear-$GPU.json" --trace "$OUT/trace-m8-$GPU.json"
