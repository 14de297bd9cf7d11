"""Launch: back-to-back empty-kernel cost, launch + synchronize round trip, per-program start cost."""

from __future__ import annotations

import numpy as np
import triton
from theodolite.probes import analysis
from theodolite.probes.common import ProbeContext, ProbeResult, cuda_time, wall_time


@triton.jit
def empty_kernel(x_ptr):
    pass


def run(ctx: ProbeContext) -> ProbeResult:
    import torch

    result = ProbeResult()
    x = torch.zeros(1, device=f"cuda:{ctx.device}")
    empty_kernel[(1,)](x)
    launches = 500 if ctx.quick else 2000

    result.metrics["launch_overhead"] = analysis.measure_with_retries(
        lambda: cuda_time(lambda: empty_kernel[(1,)](x), launches=launches, warmup=10),
        "launch_overhead",
        "s",
        "launch.back_to_back",
        repeats=ctx.repeats,
        retries=ctx.retries,
        cv_threshold=0.05,
        settings={"launches": launches, "launcher": "triton"},
        note="GPU time between events around back-to-back Triton launches of an empty kernel, per launch",
    )
    result.metrics["launch_roundtrip"] = analysis.measure_with_retries(
        lambda: float(np.median([wall_time(lambda: empty_kernel[(1,)](x)) for _ in range(100)])),
        "launch_roundtrip",
        "s",
        "launch.roundtrip",
        repeats=ctx.repeats,
        retries=ctx.retries,
        cv_threshold=0.05,
        settings={"calls_per_sample": 100},
        note="wall time of launch + torch.cuda.synchronize, median of 100 per sample",
    )
    big = ctx.sm_count * 2048

    def per_program() -> float:
        full = cuda_time(lambda: empty_kernel[(big,)](x), launches=20)
        half = cuda_time(lambda: empty_kernel[(big // 2,)](x), launches=20)
        return max((full - half) / (big - big // 2), 1e-12)

    result.metrics["program_start_cost"] = analysis.measure_with_retries(
        per_program,
        "program_start_cost",
        "s",
        "launch.grid_difference",
        repeats=ctx.repeats,
        retries=ctx.retries,
        cv_threshold=0.05,
        settings={"programs": big, "num_warps": 4},
        note="(t(grid) - t(grid/2)) / (grid/2) for an empty kernel: device-wide time per extra program",
    )
    return result
