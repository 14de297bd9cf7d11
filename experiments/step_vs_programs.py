"""Time per K-step of one output tile against how many SMs run such tiles at once (loaded memory latency).

One tile per program, one program per SM: C[BM, P*BN] = A[BM, K] @ B[K, P*BN] with the persistent kernel,
unflattened, for P programs; the K-step time is the difference of K = 8192 and K = 4096 over their 64 (BLOCK_K
64) extra steps, so launch, prologue and epilogue cancel.  B streams from HBM (each program its own columns),
A is shared (L2).  From the step time: bytes per step per SM / step = one SM's bandwidth, and with (stages - 1)
steps in flight, (stages - 1) x bytes per step / bandwidth = the latency one load really waits.  bf16, random
data, do_bench medians (L2 flushed).  Run on a GPU from the repository root (writes ``$OUT/step-vs-programs.json``):

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/step_vs_programs.py
"""

import json
import os

import torch
import triton
from theodolite.kernels.benchmark import make_inputs
from theodolite.kernels.config import GemmConfig
from theodolite.kernels.launch import plan_gemm

TILES = [(64, 128, 4), (128, 128, 8), (128, 256, 8)]  # block_m, block_n, warps
STAGES = (2, 3, 4)
PROGRAMS = (8, 16, 32, 64, 96, 132)
K_SHORT, K_LONG = 4096, 8192
device = torch.device("cuda")
sms = torch.cuda.get_device_properties(0).multi_processor_count
rows = []
for bm, bn, warps in TILES:
    for stages in STAGES:
        config = GemmConfig("persistent", bm, bn, 64, 8, warps, stages)
        for programs in PROGRAMS:
            if programs > sms:
                continue
            times = {}
            for k in (K_SHORT, K_LONG):
                a, b = make_inputs(bm, programs * bn, k, "bf16", "nn", device, seed=k + programs)
                try:
                    plan = plan_gemm(a, b, config)
                    times[k] = triton.testing.do_bench(plan.run, warmup=25, rep=60, return_mode="median")
                except Exception as error:  # e.g. shared memory of a 4-stage 128x256 tile
                    times[k] = None
                    print(config.key, programs, type(error).__name__, str(error)[:120])
            if None in times.values():
                continue
            step_us = (times[K_LONG] - times[K_SHORT]) * 1e3 / ((K_LONG - K_SHORT) / 64)
            step_bytes = (bm + bn) * 64 * 2
            bandwidth = step_bytes / (step_us * 1e-6)  # per SM
            row = {
                "config": config.key, "programs": programs, "ms_k4096": times[K_SHORT], "ms_k8192": times[K_LONG],
                "step_us": step_us, "sm_gbs": bandwidth / 1e9,
                "hbm_tbs": programs * bn * 64 * 2 / (step_us * 1e-6) / 1e12,
                "latency_us": (stages - 1) * step_bytes / bandwidth * 1e6,
            }  # fmt: skip
            rows.append(row)
            print(f"{config.key:36s} P={programs:4d} step {step_us:6.3f} us  SM {row['sm_gbs']:6.1f} GB/s  "
                  f"B stream {row['hbm_tbs']:5.2f} TB/s  latency {row['latency_us']:5.2f} us", flush=True)  # fmt: skip
            del a, b
out = os.path.join(os.environ.get("OUT", "."), "step-vs-programs.json")
with open(out, "w") as stream:
    json.dump({"device": torch.cuda.get_device_name(), "triton": triton.__version__, "torch": torch.__version__,
               "command": "PYTHONPATH=$PWD OUT=$OUT python3 experiments/step_vs_programs.py",
               "rows": rows}, stream, indent=1)  # fmt: skip
