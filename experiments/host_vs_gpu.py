"""Where a tiny GEMM's time goes: host us/call, GPU us/call and back-to-back us/call, ours and torch.matmul.

Run on a GPU machine from the repository root (writes ``$OUT/diag.json``, prints a table)::

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/host_vs_gpu.py

- host: launches enqueued while the GPU spins for 50 ms, so they only cost host time;
- gpu: a CUDA graph of 20 calls replayed (no host work);
- b2b: back-to-back calls on 16 rotated input sets (what ``theodolite validate`` measures for small shapes).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch
import triton
from theodolite.kernels.benchmark import make_inputs
from theodolite.kernels.config import GemmConfig
from theodolite.kernels.launch import gemm, plan_gemm

CASES = [
    (128, 128, 128, "persistent/128x128x64/g8/w8/s4/k1/f"),
    (128, 128, 128, "persistent/16x64x128/g8/w4/s4/k1"),
    (956, 41, 104, "persistent/32x128x64/g8/w4/s4/k1"),
    (956, 41, 104, "persistent/16x64x128/g8/w4/s4/k1"),
    (364, 129, 2317, "splitk/32x128x64/g8/w4/s4/k4"),
    (364, 129, 2317, "persistent/32x128x64/g8/w4/s4/k1"),
    (324, 6757, 146, "persistent/256x128x64/g8/w8/s4/k1"),
    (324, 6757, 146, "persistent/128x128x64/g8/w8/s4/k1/f"),
    (30, 1289, 5177, "streamk/128x128x64/g8/w8/s4/k1"),
    (30, 1289, 5177, "splitk/16x64x128/g8/w4/s4/k8"),
    (656, 45, 8053, "splitk/16x64x128/g8/w4/s4/k16"),
    (332, 12914, 36, "persistent/128x128x64/g8/w8/s4/k1/f"),
    (2048, 2048, 2048, "tma/128x256x64/g8/w8/s3/k1/f"),
]


@triton.jit
def _empty(x_ptr):
    pass


def host_us(fn: Callable[[], Any], calls: int = 200) -> float:
    torch.cuda.synchronize()
    torch.cuda._sleep(int(2e9 * 0.05))  # ~50 ms of GPU spin: the launches below only enqueue
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    seconds = time.perf_counter() - start
    torch.cuda.synchronize()
    return seconds / calls * 1e6


def graph_us(fn: Callable[[], Any], calls: int = 20, repeats: int = 20) -> float:
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        times.append(begin.elapsed_time(end) * 1e3 / calls)
    return sorted(times)[len(times) // 2]


def back_to_back_us(fns: Sequence[Callable[[], Any]], calls: int = 400, repeats: int = 7) -> float:
    times = []
    for _ in range(repeats):
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        for i in range(calls):
            fns[i % len(fns)]()
        end.record()
        torch.cuda.synchronize()
        times.append(begin.elapsed_time(end) * 1e3 / calls)
    return sorted(times)[len(times) // 2]


def main() -> None:
    rows: list[dict[str, Any]] = []
    x = torch.empty(1, device="cuda")

    def jit() -> None:
        _empty[(1,)](x)

    jit()
    runner = _empty[(1,)](x)[(1, 1, 1)]

    def compiled() -> None:
        runner(x)

    for name, fn in (("empty triton kernel via JIT", jit), ("empty triton kernel, compiled[grid]", compiled)):
        rows.append({"case": name, "host": host_us(fn), "gpu": graph_us(fn), "b2b": back_to_back_us([fn])})
    device = torch.device("cuda")
    for m, n, k, key in CASES:
        config = GemmConfig.from_key(key)
        sets = [make_inputs(m, n, k, "bf16", "nn", device, seed=i) for i in range(16)]
        outs = [torch.empty(m, n, device=device, dtype=torch.bfloat16) for _ in sets]
        ours = [lambda a=a, b=b, o=o, c=config: gemm(a, b, c, out=o) for (a, b), o in zip(sets, outs, strict=True)]
        theirs = [lambda a=a, b=b, o=o: torch.matmul(a, b, out=o) for (a, b), o in zip(sets, outs, strict=True)]
        ours[0]()
        theirs[0]()
        torch.cuda.synchronize()
        steps = len(plan_gemm(sets[0][0], sets[0][1], config, out=outs[0]).steps)
        row = {
            "case": f"{m}x{n}x{k} {key}", "steps": steps,
            "host": host_us(ours[0]), "gpu": graph_us(ours[0]), "b2b": back_to_back_us(ours),
            "t_host": host_us(theirs[0]), "t_gpu": graph_us(theirs[0]), "t_b2b": back_to_back_us(theirs),
        }  # fmt: skip
        rows.append(row)
        print(row, flush=True)
    with open(os.path.join(os.environ.get("OUT", "/tmp"), "diag.json"), "w") as stream:
        json.dump(rows, stream, indent=1)
    print(f"{'case':58s} {'st':>2s} {'host':>6s} {'gpu':>6s} {'b2b':>6s} | {'t_host':>6s} {'t_gpu':>6s} {'t_b2b':>6s}")
    for r in rows:
        print(
            f"{r['case'][:58]:58s} {r.get('steps', 0):2d} {r['host']:6.1f} {r['gpu']:6.1f} {r['b2b']:6.1f} | "
            f"{r.get('t_host', 0):6.1f} {r.get('t_gpu', 0):6.1f} {r.get('t_b2b', 0):6.1f}"
        )


if __name__ == "__main__":
    main()
