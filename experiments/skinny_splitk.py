"""What makes 16-row split-K slow on dev130 (419x40x9016, bf16, aligned): the masked N columns, the K tail, or the
split-K kernel itself?  dev130 and its neighbours with N = 64 (no N mask) and K = 8192 (no K tail) are timed at K and
about K/2 (the difference over the extra K-steps is a step, the rest fixed), back to back on rotated input copies in
a CUDA graph (the validation harness's mode for inputs under L2 / 2), torch.matmul beside them.  Run on a GPU from
the repository root (writes ``$OUT/skinny-splitk.json``):

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/skinny_splitk.py
"""

import json
import os

import torch
import triton
from theodolite.kernels.benchmark import Timer, make_inputs, rotation_count
from theodolite.kernels.config import GemmConfig
from theodolite.kernels.launch import plan_gemm

SHAPES = [(419, 40, 9016), (419, 64, 9016), (419, 40, 8192), (419, 64, 8192), (416, 64, 8192), (2112, 64, 8192)]
CONFIGS = [
    "splitk/16x64x128/g8/w4/s4/k2", "splitk/16x64x128/g8/w4/s4/k4", "splitk/16x64x128/g8/w4/s4/k8",
    "persistent/16x64x128/g8/w4/s4/k1", "splitk/64x64x128/g8/w4/s4/k4", "splitk/64x64x128/g8/w4/s4/k8",
    "streamk/64x64x64/g8/w4/s4/k1", "persistent/64x64x64/g8/w4/s4/k1",
]  # fmt: skip
device = torch.device("cuda")
timer = Timer()
rows = []
for m, n, full_k in SHAPES:
    for k in (full_k, full_k // 2 // 128 * 128 + full_k % 128):  # the same K tail, about half the steps
        a, b = make_inputs(m, n, k, "bf16", "nn", device, seed=m + n + k)
        out = torch.empty((m, n), device=device, dtype=torch.bfloat16)
        copies = rotation_count((a.numel() + b.numel() + out.numel()) * 2, timer.l2)
        sets = [(a, b, out)] + [(a.clone(), b.clone(), out.clone()) for _ in range(copies - 1)]
        calls = {"torch": [lambda x=x, y=y, o=o: torch.matmul(x, y, out=o) for x, y, o in sets]}
        ref = torch.matmul(a.float(), b.float())
        for key in CONFIGS:
            plans = [plan_gemm(x, y, GemmConfig.from_key(key), out=o) for x, y, o in sets]
            plans[0].run()
            err = ((out.float() - ref).abs().max() / ref.abs().max()).item()
            if not err < 1e-2:
                print(m, n, k, key, "wrong result", err)
                continue
            calls[key] = [p.run for p in plans]
        keys = list(calls)
        times = timer.interleaved([calls[c] for c in keys], keep=range(len(keys)))
        for c, t in zip(keys, times, strict=True):
            rows.append({"M": m, "N": n, "K": k, "config": c, "us": t * 1e3})
        named = zip(keys, times, strict=True)
        print(f"{m}x{n}x{k}: " + "  ".join(f"{c.replace('/g8/w4/s4', '')} {t * 1e3:.1f}" for c, t in named), flush=True)
        del sets, calls, plans
out_path = os.path.join(os.environ.get("OUT", "."), "skinny-splitk.json")
with open(out_path, "w") as stream:
    json.dump({"device": torch.cuda.get_device_name(), "triton": triton.__version__, "torch": torch.__version__,
               "command": "PYTHONPATH=$PWD OUT=$OUT python3 experiments/skinny_splitk.py",
               "rows": rows}, stream, indent=1)  # fmt: skip
print("wrote", out_path)
