"""Which raggedness makes the pointer-based 128x256 kernels slower than the TMA one on large shapes (bf16, "nn").

The H200 sweeps time tma/128x256x64 s3 flattened 0.84-0.94x of persistent/128x256x64 s3 flattened on large ragged
shapes (dev049, dev103, dev174, dev197) but 1.00-1.17x on the aligned LLM shapes.  Here one factor at a time
departs from an aligned base (5120 x 12544 x 10752): a ragged K, M, N (odd N: B copied into a padded buffer; N a
multiple of 8: no copy), then the sweep shapes themselves.  Each shape times the configs and torch.matmul
interleaved (``Timer.interleaved``: the harness's timing).  Writes ``$OUT/ragged-tma.json``:

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/ragged_tma.py
"""

import json
import os

import torch
import triton
from theodolite.kernels.benchmark import Timer, make_inputs
from theodolite.kernels.config import GemmConfig
from theodolite.kernels.launch import plan_gemm

SHAPES = {  # name: (M, N, K); dev*: random-dev.csv
    "aligned": (5120, 12544, 10752), "k-ragged": (5120, 12544, 10776), "m-ragged": (5013, 12544, 10752),
    "n-ragged8": (5120, 12504, 10752), "n-odd": (5120, 12503, 10752), "dev049": (5013, 12503, 10776),
    "dev103": (7364, 2962, 3317), "dev174": (3470, 9617, 656), "k-ragged-small": (4096, 4096, 4040),
    "k-aligned-small": (4096, 4096, 4096), "llama3-8b.down": (16384, 4096, 14336),
}  # fmt: skip
CONFIGS = [
    "tma/128x256x64/g8/w8/s3/k1/f", "tma/128x256x64/g8/w8/s4/k1/f", "persistent/128x256x64/g8/w8/s3/k1/f",
    "persistent/128x256x64/g8/w8/s4/k1/f", "streamk/128x256x64/g8/w8/s3/k1",
]  # fmt: skip
device = torch.device("cuda")
timer = Timer()
rows = []
for name, (m, n, k) in SHAPES.items():
    a, b = make_inputs(m, n, k, "bf16", "nn", device, seed=m + n + k)
    out = torch.empty((m, n), device=device, dtype=torch.bfloat16)
    calls = {"torch": [lambda: torch.matmul(a, b, out=out)]}
    ref = torch.matmul(a, b).float()
    for key in CONFIGS:
        out.fill_(float("nan"))
        plan = plan_gemm(a, b, GemmConfig.from_key(key), out=out)
        plan.run()
        err = ((out.float() - ref).abs().max() / ref.abs().max()).item()
        if not err < 1e-2:
            print(name, key, "WRONG RESULT", err)
            continue
        calls[key] = [plan.run]
    keys = list(calls)
    times = timer.interleaved([calls[c] for c in keys], keep=range(len(keys)))
    for c, t in zip(keys, times, strict=True):
        rows.append({"shape": name, "M": m, "N": n, "K": k, "config": c, "us": t * 1e3})
    labels = [c.replace("/g8", "").replace("/k1", "").replace("/w8", "").replace("128x256x64/", "") for c in keys]
    print(f"{name:16s} " + "  ".join(f"{c}:{t * 1e3:.0f}" for c, t in zip(labels, times, strict=True)), flush=True)
    del a, b, out, ref, calls
out_path = os.path.join(os.environ.get("OUT", "."), "ragged-tma.json")
with open(out_path, "w") as stream:
    command = __doc__.split("\n\n")[-1].strip()
    json.dump({"device": torch.cuda.get_device_name(), "triton": triton.__version__, "torch": torch.__version__,
               "command": command, "rows": rows}, stream, indent=1)  # fmt: skip
print("wrote", out_path)
