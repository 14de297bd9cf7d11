"""Does the row pitch of an operand (its leading dimension, in bytes) slow the pointer-based kernels, with the
shape fixed?  ``ragged_tma.py`` found persistent 128x256 24% slower than TMA at N = 12504 (pitch 25008 bytes,
a multiple of 16 but not of 128) and 1-2% at N = 12544; here N = 12288 stays and only the pitch of B (or A, or
the output) moves: rows padded by 8, 16, 32, 64 and 128 elements (bf16, "nn"; strided views of wider buffers).
Each case times the configs and torch.matmul interleaved (``Timer.interleaved``).  Writes ``$OUT/row-pitch.json``:

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/row_pitch.py
"""

import json
import os

import torch
import triton
from theodolite.kernels.benchmark import Timer
from theodolite.kernels.config import GemmConfig
from theodolite.kernels.launch import plan_gemm

M, N, K = 5120, 12288, 10752
CASES = [("b", 0), ("b", 8), ("b", 16), ("b", 32), ("b", 64), ("b", 128), ("a", 8), ("a", 64), ("out", 8)]
CONFIGS = [
    "tma/128x256x64/g8/w8/s3/k1/f", "persistent/128x256x64/g8/w8/s3/k1/f", "persistent/128x256x64/g8/w8/s4/k1/f",
    "persistent/128x128x64/g8/w8/s4/k1/f",
]  # fmt: skip


def strided(rows: int, cols: int, pad: int, gen: torch.Generator) -> torch.Tensor:
    """A rows x cols bf16 view of a rows x (cols + pad) buffer of random values."""
    buf = torch.randn(rows, cols + pad, device="cuda", generator=gen).to(torch.bfloat16)
    return buf[:, :cols]


timer = Timer()
gen = torch.Generator(device="cuda").manual_seed(0)
rows = []
for which, pad in CASES:
    a = strided(M, K, pad if which == "a" else 0, gen)
    b = strided(K, N, pad if which == "b" else 0, gen)
    out = strided(M, N, pad if which == "out" else 0, gen)
    ref = torch.matmul(a, b).float()
    calls = {"torch": [lambda a=a, b=b, out=out: torch.matmul(a, b, out=out)]}
    for key in CONFIGS:
        out.fill_(float("nan"))
        plan = plan_gemm(a, b, GemmConfig.from_key(key), out=out)
        plan.run()
        err = ((out.float() - ref).abs().max() / ref.abs().max()).item()
        if not err < 1e-2:
            print(which, pad, key, "WRONG RESULT", err)
            continue
        calls[key] = [plan.run]
    keys = list(calls)
    times = timer.interleaved([calls[c] for c in keys], keep=range(len(keys)))
    for c, t in zip(keys, times, strict=True):
        rows.append({"operand": which, "pad_elements": pad, "M": M, "N": N, "K": K, "config": c, "us": t * 1e3})
    labels = [c.replace("/g8", "").replace("/k1", "").replace("/w8", "") for c in keys]
    print(f"{which:3s} pad {pad:3d} " + "  ".join(f"{c}:{t * 1e3:.0f}" for c, t in zip(labels, times, strict=True)),
          flush=True)  # fmt: skip
    del a, b, out, ref, calls
out_path = os.path.join(os.environ.get("OUT", "."), "row-pitch.json")
with open(out_path, "w") as stream:
    command = __doc__.split("\n\n")[-1].strip()
    json.dump({"device": torch.cuda.get_device_name(), "triton": triton.__version__, "torch": torch.__version__,
               "command": command, "rows": rows}, stream, indent=1)  # fmt: skip
print("wrote", out_path)
