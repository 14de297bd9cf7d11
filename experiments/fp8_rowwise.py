"""Do rowwise fp8 scales cost anything against per-tensor ones, and against torch._scaled_mm's rowwise call? (GPU)

fp8 e4m3, layout nt (x [M, K] @ w.t() of an nn.Linear weight [N, K]), bf16 output; scales per tensor (one float32
element each) or rowwise (scale_a [M, 1], scale_b [1, N]).  Each call is timed as a CUDA-graph replay of back-to-back
calls rotating input sets (enough of them to exceed twice the L2), four ways side by side, median of rounds:
``torch._scaled_mm`` and ``theodolite.matmul`` (the model's pick, its launch cache's runner), each per tensor and
rowwise; theodolite's rowwise output is checked against ``_scaled_mm``'s.

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/fp8_rowwise.py
"""

from __future__ import annotations

import json
import os
import statistics
import sys

import torch

import theodolite

SHAPES = [(1, 4096, 4096), (8, 6144, 4096), (32, 28672, 4096), (128, 4096, 14336), (512, 4096, 4096),
          (1024, 6144, 4096), (4096, 4096, 4096), (4096, 28672, 4096)]  # fmt: skip
ROUNDS = 7
CALLS = 20


def inputs(m: int, n: int, k: int, sets: int) -> list[dict[str, torch.Tensor]]:
    out = []
    for _ in range(sets):
        out.append({
            "x": (torch.randn(m, k, device="cuda") / 4).to(torch.float8_e4m3fn),
            "w": (torch.randn(n, k, device="cuda") / 4).to(torch.float8_e4m3fn),
            "sa1": torch.rand((), device="cuda") + 0.5, "sb1": torch.rand((), device="cuda") + 0.5,
            "sa": torch.rand(m, 1, device="cuda") + 0.5, "sb": torch.rand(1, n, device="cuda") + 0.5,
        })  # fmt: skip
    return out


def ways() -> dict[str, object]:
    mm = torch._scaled_mm
    bf16 = torch.bfloat16
    return {
        "scaled_mm per tensor": lambda s: mm(s["x"], s["w"].t(), scale_a=s["sa1"], scale_b=s["sb1"], out_dtype=bf16),
        "scaled_mm rowwise": lambda s: mm(s["x"], s["w"].t(), scale_a=s["sa"], scale_b=s["sb"], out_dtype=bf16),
        "theodolite per tensor": lambda s: theodolite.matmul(s["x"], s["w"].t(), scale_a=s["sa1"], scale_b=s["sb1"]),
        "theodolite rowwise": lambda s: theodolite.matmul(s["x"], s["w"].t(), scale_a=s["sa"], scale_b=s["sb"]),
    }


def graph_us(fn, sets: list[dict[str, torch.Tensor]]) -> float:  # type: ignore[no-untyped-def]
    for s in sets[:2]:
        fn(s)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(CALLS):
            fn(sets[i % len(sets)])
    graph.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / CALLS


def main() -> None:
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    rows = []
    for m, n, k in SHAPES:
        per_set = m * k + n * k + 2 * m * n
        sets = inputs(m, n, k, max(1, min(16, -(-2 * l2 // per_set))))
        s = sets[0]
        ref = torch._scaled_mm(s["x"], s["w"].t(), scale_a=s["sa"], scale_b=s["sb"], out_dtype=torch.bfloat16)
        got = theodolite.matmul(s["x"], s["w"].t(), scale_a=s["sa"], scale_b=s["sb"])
        err = float((got.float() - ref.float()).abs().max() / ref.float().abs().max())
        times: dict[str, list[float]] = {name: [] for name in ways()}
        for _ in range(ROUNDS):
            for name, fn in ways().items():
                times[name].append(graph_us(fn, sets))
        row = {"m": m, "n": n, "k": k, "sets": len(sets), "max_rel_err_vs_scaled_mm": err,
               "us": {name: statistics.median(v) for name, v in times.items()},
               "pick": theodolite.select(m, n, k, dtype="fp8e4m3", layout="nt").config.key}  # fmt: skip
        rows.append(row)
        us = row["us"]
        print(f"{m:5d}x{n:6d}x{k:6d}  " + "  ".join(f"{name} {v:8.2f}" for name, v in us.items())
              + f"  rowwise ours/torch {us['scaled_mm rowwise'] / us['theodolite rowwise']:.3f}x"
              + f"  ours rowwise/per-tensor {us['theodolite rowwise'] / us['theodolite per tensor']:.3f}"
              + f"  err {err:.1e}",
              flush=True)  # fmt: skip
    path = os.path.join(os.environ.get("OUT", "."), "fp8-rowwise.json")
    with open(path, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "command": " ".join(sys.argv),
                   "rows": rows}, f, indent=1)  # fmt: skip


if __name__ == "__main__":
    main()
