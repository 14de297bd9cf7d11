"""How much of a graph-replayed time per call is the host's graph launch, and how long a GPU spin ahead hides it?

``Timer.interleaved`` times a shape whose inputs fit in L2 by replaying a CUDA graph of back-to-back calls between two
events.  With the GPU idle before the replay, the start event fires at once and the replay's first kernel waits for
the host's graph launch: that latency, over the graph's calls, lands in every call's time.  The GPU test of
``timing_floors`` read an empty kernel at 3.6 us per call in graph replays (and 5.8 once), above its 2.9 us between
two events after a flush (H200, one GPU), where ~1 us is the GPU's own gap.  The graph's calls come from a first
estimate that carries the same latency, so the bias grows roughly as its square over ``batch_us``.

This times, side by side on one GPU, an empty kernel and torch.matmul and the model's pick for bf16 nt shapes that
fit in L2 (1 to 2048 rows), with the replay queued behind a spin of 0 (the timer before 2026-11-29), 50k, 200k (the
default since) and 1M cycles, three rounds each.  Run on a GPU from the repository root::

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/replay_bias.py    # $OUT/replay-bias-<gpu>.json

Measured (H200, one GPU; `replay-bias-h200.json`, medians of three rounds, against the 200k spin): unspun, the
empty kernel reads 1.51 us per call against 0.69 (+120%), and every GEMM 1.1-3.9% more (median +1.9%, torch.matmul
and the picks alike, 1 to 2048 rows); a 50k spin leaves +13.5% on the empty kernel and at most +1.4% on the GEMMs,
1M cycles changes nothing beyond 200k (within +-0.5%).  The GPU test that found it read the empty kernel at 3.6 us
unspun on another host: the bias follows the host's graph-launch latency.  Since the graphs' calls hold ~300 us of
work, it is a near-uniform few percent per call: it leaves side-by-side ratios (selection efficiency) about as they
are and made absolute times (predicted / measured, calibrate's timings) a few percent long.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

import torch
import triton
from harness import add_runs, gpu_name, rotated_inputs, write_rows
from theodolite.kernels.benchmark import Timer

from theodolite.api import select

SPINS = (0, 50_000, 200_000, 1_000_000)
ROUNDS = 3
SHAPES = (
    (1, 1024, 1024), (8, 4096, 1024), (16, 64, 128), (64, 1024, 1024), (128, 128, 128), (256, 1024, 512),
    (512, 512, 512), (1024, 1024, 1024), (2048, 2048, 1024),
)  # fmt: skip


@triton.jit
def _empty(x_ptr):
    pass


def _cases() -> list[tuple[str, dict[str, list[Callable[[], Any]]]]]:
    timer = Timer()
    x = torch.zeros(1, device="cuda")
    cases: list[tuple[str, dict[str, list[Callable[[], Any]]]]] = [
        ("empty", {"empty": [lambda: _empty[(1,)](x)]}),
    ]
    for m, n, k in SHAPES:
        sets, calls, ref = rotated_inputs(m, n, k, timer, torch.device("cuda"), layout="nt")
        pick = select(m, n, k, dtype="bf16", layout="nt").config.key
        add_runs(calls, sets, [pick], ref)
        cases.append((f"{m}x{n}x{k}", calls))
    return cases


def main() -> None:
    cases = _cases()
    timer = Timer()
    samples: dict[tuple[str, str, int], list[float]] = {}
    for r in range(ROUNDS):
        for spin in SPINS if r % 2 == 0 else SPINS[::-1]:
            timer.replay_spin_cycles = spin
            for name, calls in cases:
                times = timer.interleaved(list(calls.values()), keep=range(len(calls)))
                assert timer.last_mode == "graph", timer.last_mode
                for key, ms in zip(calls, times, strict=True):
                    samples.setdefault((name, key, spin), []).append(ms * 1e3)
    rows = []
    for (name, key, spin), us in samples.items():
        rows.append({"case": name, "candidate": key, "spin": spin, "us": statistics.median(us), "samples": us})
    print(f"{'case':>16s} {'candidate':>40s} " + " ".join(f"{f'spin {s}':>12s}" for s in SPINS))
    for name, calls in cases:
        for key in calls:
            line = " ".join(f"{statistics.median(samples[(name, key, s)]):12.3f}" for s in SPINS)
            print(f"{name:>16s} {key:>40s} {line}", flush=True)
    command = "PYTHONPATH=$PWD OUT=$OUT python3 experiments/replay_bias.py"
    print("wrote", write_rows(f"replay-bias-{gpu_name()}", command, rows, spins=list(SPINS), rounds=ROUNDS))


if __name__ == "__main__":
    main()
