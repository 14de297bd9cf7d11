"""Where small tiles spend their time: per-K-step and fixed time of skinny-shape configs, and what the L2 flush
costs (H100/H200, bf16).

For shapes where the model's pick (16x64 split-K) ran 1.3-1.6x slower than the best, each config is timed at K and
K/2 (the difference over the extra K-steps is the step time, the rest is fixed), three ways: after do_bench's L2
flush (a 256 MB memset: L2 left full of dirty lines), after a read of the same buffer (L2 full of clean lines),
and back to back on rotated input copies in a CUDA graph (the harness's mode for inputs under L2 / 2).
torch.matmul is timed alike.  Run on a GPU from the repository root (writes ``$OUT/small-tile-steps.json``):

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/small_tile_steps.py
"""

import json
import os
import statistics

import torch
import triton
from theodolite.kernels.benchmark import Timer, make_inputs, rotation_count
from theodolite.kernels.config import GemmConfig
from theodolite.kernels.launch import plan_gemm

SHAPES = {  # name: (M, N, K)
    "dev130": (419, 40, 9016),
    "dev178": (756, 24, 2621),
    "dev161": (656, 45, 8053),
    "dev131": (30, 1289, 5177),
    "llama3-8b.o/1": (1, 4096, 4096),
    "llama3-8b.o/128": (128, 4096, 4096),
}
CONFIGS = [
    "splitk/16x64x128/g8/w4/s4/k2", "splitk/16x64x128/g8/w4/s4/k4", "splitk/16x64x128/g8/w4/s4/k8",
    "splitk/32x128x64/g8/w4/s4/k4", "splitk/32x128x64/g8/w4/s4/k16", "splitk/64x64x128/g8/w4/s4/k4",
    "splitk/64x64x128/g8/w4/s4/k8", "streamk/64x64x64/g8/w4/s4/k1", "persistent/16x64x128/g8/w4/s4/k1",
    "persistent/64x64x64/g8/w4/s4/k1",
]  # fmt: skip
device = torch.device("cuda")
timer = Timer()
cache = timer.cache


def flushed(fn, dirty: bool, reps: int = 40) -> float:
    times = []
    for _ in range(reps):
        if dirty:
            timer.driver.clear_cache(cache)  # memset: dirty lines
        else:
            cache.max()  # a read: clean lines (the reduction's own output is a few bytes)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return statistics.median(times)


rows = []
for name, (m, n, full_k) in SHAPES.items():
    for k in (full_k, full_k // 2):
        a, b = make_inputs(m, n, k, "bf16", "nn", device, seed=m + n + k)
        out = torch.empty((m, n), device=device, dtype=torch.bfloat16)
        set_bytes = (a.numel() + b.numel() + out.numel()) * 2
        copies = rotation_count(set_bytes, timer.l2)
        sets = [(a, b, out)] + [(a.clone(), b.clone(), out.clone()) for _ in range(copies - 1)]
        calls = {"torch": [lambda x=x, y=y, o=o: torch.matmul(x, y, out=o) for x, y, o in sets]}
        for key in CONFIGS:
            try:
                plans = [plan_gemm(x, y, GemmConfig.from_key(key), out=o) for x, y, o in sets]
                plans[0].run()
                ref = torch.matmul(a.float(), b.float())
                err = ((out.float() - ref).abs().max() / ref.abs().max()).item()
                if not err < 1e-2:
                    print(name, k, key, "wrong result", err)
                    continue
                calls[key] = [p.run for p in plans]
            except Exception as error:  # not legal here (e.g. split-K over its tile limit)
                print(name, k, key, type(error).__name__, str(error)[:100])
        keys = list(calls)
        graph = timer.interleaved([calls[c] for c in keys], keep=range(len(keys)))
        for c, g in zip(keys, graph, strict=True):
            dirty, clean = flushed(calls[c][0], True), flushed(calls[c][0], False)
            row = {"shape": name, "M": m, "N": n, "K": k, "config": c, "rotated_us": g * 1e3,
                   "flushed_dirty_us": dirty, "flushed_clean_us": clean}  # fmt: skip
            rows.append(row)
            print(f"{name:16s} K={k:6d} {c:34s} rot {row['rotated_us']:7.2f} dirty {row['flushed_dirty_us']:7.2f} "
                  f"clean {row['flushed_clean_us']:7.2f}", flush=True)  # fmt: skip
        del sets, calls
out_path = os.path.join(os.environ.get("OUT", "."), "small-tile-steps.json")
with open(out_path, "w") as stream:
    json.dump({"device": torch.cuda.get_device_name(), "triton": triton.__version__, "torch": torch.__version__,
               "command": "PYTHONPATH=$PWD OUT=$OUT python3 experiments/small_tile_steps.py",
               "rows": rows}, stream, indent=1)  # fmt: skip
print("wrote", out_path)
