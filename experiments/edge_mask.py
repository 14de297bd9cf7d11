"""Rows/columns past a tile's edge: wrapped (``% LM``, ``% LN``: the edge tile loads duplicates of the first rows or
columns) or masked (not loaded at all), on skinny and ragged shapes (bf16, "nn").

``kernels.config.MASKED_EDGES`` is read from ``THEODOLITE_MASKED_EDGES`` at import ("none": every variant wraps,
"all": every variant masks), so each mode runs in its own process; run the modes alternately to see the drift between
runs.  (``edge-mask-h100.json`` came from the first form of this switch, ``THEODOLITE_EDGE_MASK=0/1``, the same two
modes.)  Each run times the configs back to back on
rotated input copies in a CUDA graph (the harness's mode under L2 / 2; larger inputs stay as they are), torch.matmul
beside them.  Writes ``$OUT/edge-mask-<mode>-<run>.json``:

    for r in 1 2; do for m in none all; do THEODOLITE_MASKED_EDGES=$m EDGE_RUN=$r PYTHONPATH=$PWD OUT=$OUT \\
        python3 experiments/edge_mask.py; done; done
"""

import json
import os

import torch
import triton
from theodolite.kernels import config as kernel_config
from theodolite.kernels.benchmark import Timer, make_inputs, rotation_count
from theodolite.kernels.config import GemmConfig
from theodolite.kernels.launch import plan_gemm

SHAPES = {  # name: (M, N, K); dev*: random-dev.csv
    "dev130": (419, 40, 9016), "dev130-n64": (419, 64, 9016), "dev178": (756, 24, 2621), "dev161": (656, 45, 8053),
    "dev001": (1644, 21, 1243), "dev097": (93, 80, 12312), "dev117": (455, 72, 5561), "dev034": (87, 13977, 370),
    "issue4-a": (3000, 1500, 7000), "issue4-b": (777, 5555, 2222), "square": (4096, 4096, 4096),
}  # fmt: skip
CONFIGS = [
    "splitk/16x64x128/g8/w4/s4/k4", "splitk/16x64x128/g8/w4/s4/k8", "persistent/16x64x128/g8/w4/s4/k1",
    "splitk/64x64x128/g8/w4/s4/k8", "streamk/64x64x64/g8/w4/s4/k1", "streamk/128x128x64/g8/w8/s4/k1",
    "persistent/128x128x64/g8/w8/s4/k1/f", "persistent/128x256x64/g8/w8/s3/k1/f", "tma/128x256x64/g8/w8/s3/k1/f",
]  # fmt: skip
mode = kernel_config.MASKED_EDGES
device = torch.device("cuda")
timer = Timer()
rows = []
for name, (m, n, k) in SHAPES.items():
    a, b = make_inputs(m, n, k, "bf16", "nn", device, seed=m + n + k)
    out = torch.empty((m, n), device=device, dtype=torch.bfloat16)
    copies = rotation_count((a.numel() + b.numel() + out.numel()) * 2, timer.l2)
    sets = [(a, b, out)] + [(a.clone(), b.clone(), out.clone()) for _ in range(copies - 1)]
    calls = {"torch": [lambda x=x, y=y, o=o: torch.matmul(x, y, out=o) for x, y, o in sets]}
    ref = torch.matmul(a.double(), b.double())
    for key in CONFIGS:
        out.fill_(float("nan"))
        try:
            plans = [plan_gemm(x, y, GemmConfig.from_key(key), out=o) for x, y, o in sets]
            plans[0].run()
        except Exception as error:  # not legal for this shape (split-K limits)
            print(name, key, type(error).__name__, str(error)[:80])
            continue
        err = ((out.double() - ref).abs().max() / ref.abs().max()).item()
        if not err < 1e-2:
            print(name, key, "WRONG RESULT", err)
            continue
        calls[key] = [p.run for p in plans]
    keys = list(calls)
    times = timer.interleaved([calls[c] for c in keys], keep=range(len(keys)))
    for c, t in zip(keys, times, strict=True):
        rows.append({"shape": name, "M": m, "N": n, "K": k, "config": c, "us": t * 1e3})
    labels = [c.replace("/g8", "").replace("/k1", "").replace("/w4", "").replace("/w8", "") for c in keys]
    print(f"mask={mode} {name:10s} " + "  ".join(f"{c}:{t * 1e3:.1f}" for c, t in zip(labels, times, strict=True)))
    del sets, calls
out_path = os.path.join(os.environ.get("OUT", "."), f"edge-mask-{mode}-{os.environ.get('EDGE_RUN', '1')}.json")
with open(out_path, "w") as stream:
    command = __doc__.split("\n\n")[-1].strip()
    json.dump({"device": torch.cuda.get_device_name(), "triton": triton.__version__, "torch": torch.__version__,
               "masked_edges": mode, "command": command, "rows": rows}, stream, indent=1)  # fmt: skip
print("wrote", out_path)
