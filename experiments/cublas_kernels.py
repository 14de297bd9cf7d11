"""Which cuBLAS kernel torch.matmul runs where our best config loses to it (issue 4's llm shapes).

For the llm shapes whose sweep best reads under 0.95x of torch.matmul in the committed results of this GPU, records
the CUDA kernels one torch.matmul launches (torch.profiler: name, launches, device time) and times torch.matmul and
our sweep best side by side (do_bench median, inputs rotated through L2 as ``validate`` does), so the tile, cluster
and split schedule cuBLAS chose can be read from its kernel names.  Run on the device:
``PYTHONPATH=$PWD OUT=$OUT python3 experiments/cublas_kernels.py`` (writes cublas-kernels-<gpu>.json;
``--suite random-dev``: that suite's shapes under 0.95x, ``cublas-kernels-random-dev-<gpu>.json``).
"""

from __future__ import annotations

import json
import os
from typing import Any

import torch
import triton
from theodolite.kernels import gemm
from theodolite.kernels.config import GemmConfig
from torch.profiler import ProfilerActivity, profile

from harness import gpu_name
from theodolite import validation
from theodolite.results import load_results

SHAPES_UNDER = 0.95  # sweep best / torch.matmul below this
INPUT_SETS = 4  # operands rotated between calls (the smaller shapes fit in L2)


def cuda_kernels(fn: object, calls: int = 3) -> list[dict[str, object]]:
    """The CUDA kernels ``fn`` launches: name, launches per call, mean device microseconds."""
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()  # type: ignore[operator]
        torch.cuda.synchronize()
    found = []
    for event in prof.key_averages():
        if event.device_type.name != "CUDA" or event.count == 0:
            continue
        device_us = getattr(event, "device_time", None) or getattr(event, "cuda_time", 0.0)
        found.append({"name": event.key, "launches_per_call": event.count / calls, "mean_us": device_us})
    return found


def measure(row: dict[str, object]) -> dict[str, object]:
    """One shape: cuBLAS's kernels, torch.matmul and our sweep best side by side, our result's error."""
    m, n, k = (int(x) for x in str(row["shape"]).split("x"))
    bf16 = torch.bfloat16
    sets = [(torch.randn(m, k, device="cuda", dtype=bf16), torch.randn(k, n, device="cuda", dtype=bf16))
            for _ in range(INPUT_SETS)]  # fmt: skip
    config = GemmConfig.from_key(str(row["best_key"]))
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    turn = [0]

    def torch_call() -> object:
        turn[0] += 1
        a, b = sets[turn[0] % INPUT_SETS]
        return torch.matmul(a, b)

    def ours() -> object:
        turn[0] += 1
        a, b = sets[turn[0] % INPUT_SETS]
        return gemm(a, b, config, num_sms=sms)

    a, b = sets[0]
    reference = torch.matmul(a.float(), b.float())
    error = float((gemm(a, b, config, num_sms=sms).float() - reference).norm() / reference.norm())
    kernels = cuda_kernels(torch_call)
    times: dict[str, float] = {}
    for _ in range(2):  # interleaved twice, the lower median kept
        for name, fn in (("torch", torch_call), ("ours", ours)):
            ms = float(triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median"))
            times[name] = min(times.get(name, ms), ms)
    return {
        "name": row["name"], "shape": row["shape"], "best_key": row["best_key"],
        "committed_best_vs_torch": row["best_vs_torch"], "torch_ms": times["torch"], "ours_ms": times["ours"],
        "ours_vs_torch": times["torch"] / times["ours"], "rel_error": error, "torch_kernels": kernels,
    }  # fmt: skip


def main() -> None:
    import sys

    gpu = gpu_name()
    suite = sys.argv[2] if sys.argv[1:2] == ["--suite"] else "llm"  # --suite random-dev: that suite's losers
    results = load_results(f"reports/results/validate-{suite}-{gpu}.json")
    rows = [validation.shape_summary(shape) for shape in results.shapes]
    worst = sorted((r for r in rows if (r["best_vs_torch"] or 9) < SHAPES_UNDER), key=lambda r: r["best_vs_torch"])
    out = []
    for row in worst:
        found = measure(row)
        out.append(found)
        kernels: list[dict[str, Any]] = found["torch_kernels"]  # type: ignore[assignment]
        top = max(kernels, key=lambda kk: float(kk["mean_us"]))["name"] if kernels else "?"
        print(f"{row['name']:<24} {row['shape']:<16} ours/torch {found['ours_vs_torch']:.3f}  cuBLAS: {top}")
    name = f"cublas-kernels-{gpu}.json" if suite == "llm" else f"cublas-kernels-{suite}-{gpu}.json"
    path = os.path.join(os.environ.get("OUT", "."), name)
    with open(path, "w") as stream:
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": out}, stream, indent=1)


if __name__ == "__main__":
    main()
