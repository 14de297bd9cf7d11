"""Launch: back-to-back empty-kernel cost (host-driven, and replayed from a CUDA graph), launch + synchronize round
trip, per-program start cost.

Two back-to-back figures because they answer different questions: ``launch_overhead`` is what the host's launcher
allows (eager launches from Python: the GPU waits for the host), ``launch_overhead_graph`` what a launch costs the GPU
itself when the host keeps ahead (CUDA graphs, a queue filled ahead of time, a kernel behind longer work).  Kernel
timings (``validate``, do_bench) see the second; the model predicts those timings, so it reads the second."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import triton
from theodolite.probes import analysis
from theodolite.probes.common import ProbeContext, ProbeResult, cuda_time, wall_time


@triton.jit
def empty_kernel(x_ptr):
    pass


def graph_launch_time(fn: Callable[[], Any], launches: int, replays: int) -> float:
    """Seconds per launch of ``fn`` captured ``launches`` times back to back in one CUDA graph, over ``replays``
    replays between two events (one replay first, untimed): no host in the loop."""
    import torch

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()  # compiled and loaded before the capture
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(launches):
            fn()
    return cuda_time(graph.replay, launches=replays, warmup=1) / launches


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
    graph_launches, replays = (100, 5) if ctx.quick else (200, 20)
    result.metrics["launch_overhead_graph"] = analysis.measure_with_retries(
        lambda: graph_launch_time(lambda: empty_kernel[(1,)](x), graph_launches, replays),
        "launch_overhead_graph",
        "s",
        "launch.graph_back_to_back",
        repeats=ctx.repeats,
        retries=ctx.retries,
        cv_threshold=0.05,
        settings={"launches_per_graph": graph_launches, "replays": replays, "launcher": "triton"},
        note="GPU time per launch of an empty kernel captured back to back in a CUDA graph and replayed",
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
