"""Does a memory-bound kernel's partial last wave cost more than its bytes at the GPU's bandwidth?

A weight stream (M <= 16, N x K of hundreds of MB) is HBM-bound while every SM streams.  When its tiles do not fill
the last wave, the few SMs left stream at what they alone reach, so the kernel runs longer than its bytes over the
bandwidth.  The model before 2026-11-29 took one max of SM time and memory time over the whole kernel, which tied
such configs with even ones; ``model.core.cost`` now takes the max within each phase (the full waves, then the last
wave, the last wave's reads at the read share of its active SMs) and adds them.

GPU mode times 8 x N x 16384 nt (N = tiles x 256, tiles over 0.8-2.3 waves of 132 SMs) with four decode tiles, torch
side by side (``python -m theodolite bench --config``); ``--summary`` sets the timings beside the model's time and the
same terms under one max; ``--sweeps`` reads the same off committed sweeps' HBM-bound weight streams (CPU).

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/phase_roofline.py                       # GPU: $OUT/phase-roofline.json
    PYTHONPATH=$PWD python3 experiments/phase_roofline.py --summary F.json PROFILE       # no GPU
    PYTHONPATH=$PWD python3 experiments/phase_roofline.py --sweeps PROFILE RESULTS...    # no GPU

H200 seen sweeps (``--sweeps profiles/nvidia-h200.h5 reports/results/validate-wide-{855977,947201,363726,147226,711167,
430594}-h200.json.gz``): see experiments/README.md.
"""

from __future__ import annotations

import json
import math
import os
import statistics
from collections import defaultdict
from typing import Any

import numpy as np

K = 16384
TILES = (100, 132, 140, 150, 180, 264, 280, 300)  # of 256 columns; 132 SMs on the H100 and H200
SHAPES = [(f"t{t}", 8, t * 256, K) for t in TILES]
CONFIGS = ("persistent/16x256x64/g8/w4/s4/k1", "persistent/16x128x128/g8/w4/s4/k1",
           "persistent/16x64x128/g8/w4/s4/k1", "persistent/16x64x256/g8/w4/s4/k1")  # fmt: skip


def run(out: str) -> None:
    from harness import bench_configs

    bench_configs(SHAPES, CONFIGS, os.path.join(out, "phase-roofline.json"), "bf16", "nt")


def _model(profile_path: str, dtype: str = "bf16") -> Any:
    from theodolite.model.predict import table_for

    from theodolite.profile.hdf5 import load_profile

    return table_for(load_profile(profile_path), dtype)


def _times(table: Any, m: int, n: int, k: int, layout: str) -> tuple[Any, Any, dict[str, Any]]:
    """The model's seconds per config, the same terms under one max over the kernel, and the terms."""
    from theodolite.kernels.config import Problem
    from theodolite.model.predict import evaluate

    times, terms = evaluate(table, Problem(m, n, k, layout=layout), detail=True)
    kernel = times - terms["launch"] - terms["fixup"] - terms["copy"]
    one_max = times - kernel + np.maximum(terms["sm_time"], terms["mem_time"])
    return times, one_max, terms


def summary(path: str, profile_path: str) -> None:
    """A GPU run's timings beside the model's times (phases) and the one-max times, per config and tile count."""
    with open(path) as stream:
        shapes = json.load(stream)["shapes"]
    table = _model(profile_path)
    print(f"{'shape':22s} {'torch':>7s}  " + "  ".join(f"{c.split('/')[1]:>24s}" for c in CONFIGS))
    for shape in shapes:
        m, n, k = shape["M"], shape["N"], shape["K"]
        times, one_max, terms = _times(table, m, n, k, "nt")
        cells = []
        for key in CONFIGS:
            ms = shape["configs"].get(key)
            i = table.index[key]
            measured = ms * 1e3 if ms else math.nan
            cells.append(f"{measured:6.1f} ({times[i] * 1e6:6.1f} {one_max[i] * 1e6:6.1f})")
        torch_us = shape.get("torch_ms", math.nan) * 1e3
        print(f"{m}x{n}x{k:<10d} {torch_us:7.1f}  " + "  ".join(f"{c:>24s}" for c in cells))
    print("cells: measured us (model, one max over the kernel)")


def sweeps(profile_path: str, paths: list[str]) -> None:
    """HBM-bound weight streams of committed sweeps (M <= 16, aligned, >= 300 MB, the best >= 3.5 TB/s): each
    config's time over the shape's best, measured, by the model, and under one max, by the last wave's fill."""
    from theodolite.results import load_results

    table = _model(profile_path)
    rows: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
    for path in paths:
        for shape in load_results(path).shapes:
            m, n, k, layout = shape.M, shape.N, shape.K, shape.layout
            timed = {key: ms for key, ms in shape.configs.items() if ms and math.isfinite(ms) and key in table.index}
            if m > 16 or shape.batch != 1 or k % 8 or (layout[1] == "n" and n % 8) or not timed:
                continue
            best = min(timed.values())
            if n * k * 2 < 300e6 or n * k * 2 / (best * 1e-3) < 3.5e12:
                continue
            times, one_max, terms = _times(table, m, n, k, layout)
            p_best = min(times[table.index[key]] for key in timed)
            o_best = min(one_max[table.index[key]] for key in timed)
            for key, ms in timed.items():
                i = table.index[key]
                fill = float(terms["#last_wave_busy"][i])
                bucket = "one wave or even" if fill >= 0.999 else "last wave < 50%" if fill < 0.5 else "50-99%"
                rows[bucket].append((ms / best, times[i] / p_best, one_max[i] / o_best))
    for bucket, values in sorted(rows.items()):
        med = [statistics.median(v[j] for v in values) for j in range(3)]
        geo = [math.exp(statistics.fmean(math.log(v[j]) for v in values)) for j in range(3)]
        print(f"{bucket:18s} n={len(values):5d}  over the shape's best, median / geomean: measured {med[0]:.3f} / "
              f"{geo[0]:.3f}, model {med[1]:.3f} / {geo[1]:.3f}, one max {med[2]:.3f} / {geo[2]:.3f}")


if __name__ == "__main__":
    from harness import dispatch

    dispatch(run, summary, sweeps)
