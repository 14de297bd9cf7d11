"""Why do split-K slices of one or two K-steps run over their price, the more the deeper the split?

Over every legal config of the seen H200 sweeps (aligned operands), a split-K config whose slices hold one or two
K-steps reads over the model's time by more, relative to its shape's median residual, the deeper its split (split 2
about +0.00, 4 +0.09, 8 +0.12, 16 +0.15 in log; more over more waves), and calibrate's own calibration timings show
the same (+0.11).  Neither the program starts at the launch probe's device-wide cost nor a count-in serialized on the
tile's counter explains it in the sweeps (docs/model.md, known defects).  This times the split series of one tile at
one and two K-steps a slice, over one to four waves of programs, beside the persistent config of the same tile, so
that the cost one more slice adds can be read off against the model's.

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/splitk_short_slices.py   # GPU: $OUT/splitk-short-slices-GPU.json
    PYTHONPATH=$PWD python3 experiments/splitk_short_slices.py --summary F.json PROFILE   # no GPU
    PYTHONPATH=$PWD python3 experiments/splitk_short_slices.py --sweeps PROFILE RESULTS...  # no GPU: the sweeps' table
    PYTHONPATH=$PWD python3 experiments/splitk_short_slices.py --twins PROFILE RESULTS...   # no GPU: against the twins
"""

from __future__ import annotations

import json
import math
import os
import statistics
import sys
from collections import defaultdict

# (name, M, N, K), layout nt, bf16: 64 rows, 32 or 128 tiles of 64 columns, K of 4 to 16 steps of 128, so that each
# split below leaves one or two K-steps a slice
SHAPES = [(f"n{n}k{k}", 64, n, k) for n in (2048, 8192) for k in (512, 1024, 2048)]
TILES = ("16x64x128", "64x64x128")
SPLITS = {"16x64x128": (2, 4, 8, 16), "64x64x128": (2, 3, 4, 5, 8, 12)}
CONFIGS = tuple(
    [f"persistent/{tile}/g8/w4/s4/k1" for tile in TILES]
    + [f"splitk/{tile}/g8/w4/s4/k{split}" for tile in TILES for split in SPLITS[tile]]
)
SHORT_STEPS = 2  # slices of at most this many K-steps


def run(out: str) -> None:
    from harness import bench_configs, gpu_name

    bench_configs(SHAPES, CONFIGS, os.path.join(out, f"splitk-short-slices-{gpu_name()}.json"), "bf16", "nt")


def summary(path: str, profile_path: str) -> None:
    """Measured and predicted us per config, and log(measured / predicted) less the persistent twin's."""
    from theodolite.kernels.config import GemmConfig, Problem
    from theodolite.model.predict import ConfigTable, evaluate

    from theodolite.profile.hdf5 import load_profile

    with open(path) as stream:
        shapes = json.load(stream)["shapes"]
    profile = load_profile(profile_path)
    table = ConfigTable(profile, "bf16", extra=tuple(GemmConfig.from_key(key) for key in CONFIGS))
    for shape in shapes:
        problem = Problem(shape["M"], shape["N"], shape["K"], layout="nt")
        times, terms = evaluate(table, problem, detail=True)
        print(f"{shape['M']}x{shape['N']}x{shape['K']} nt (torch {shape.get('torch_ms', math.nan) * 1e3:.1f} us)")
        for tile in TILES:
            twin = f"persistent/{tile}/g8/w4/s4/k1"
            base_ms = shape["configs"].get(twin)
            base = math.log(base_ms * 1e-3 / times[table.index[twin]]) if base_ms else math.nan
            for key in (twin, *(f"splitk/{tile}/g8/w4/s4/k{s}" for s in SPLITS[tile])):
                ms = shape["configs"].get(key)
                i = table.index[key]
                model = times[i] * 1e6
                measured = ms * 1e3 if ms else math.nan
                over = math.log(measured / model) - base if ms else math.nan
                print(f"  {key:34s} measured {measured:7.2f}  model {model:7.2f}  over the twin {over:+.3f}  "
                      f"({terms['#iterations'][i]:.0f} steps a slice, {terms['#waves'][i]:.1f} waves)")  # fmt: skip


def sweeps(profile_path: str, paths: list[str]) -> None:
    """Within each shape of the sweeps (aligned operands, every legal config), log(measured / predicted) less the
    shape's median, for split-K configs whose slices hold at most SHORT_STEPS K-steps: by split and by waves."""
    from harness import sweep_residuals

    by_split: dict[int, list[float]] = defaultdict(list)
    by_waves: dict[float, list[float]] = defaultdict(list)
    for config, terms, residual in sweep_residuals(profile_path, paths):
        if config.variant != "splitk" or terms["#iterations"] > SHORT_STEPS:
            continue
        by_split[min(config.split_k, 16)].append(residual)
        by_waves[next(w for w in (1.0, 2.0, 4.0, math.inf) if terms["#waves"] <= w)].append(residual)
    print(f"split-K slices of at most {SHORT_STEPS} K-steps, log(measured / predicted) less the shape's median:")
    for split, values in sorted(by_split.items()):
        print(f"  split {split:3d}: median {statistics.median(values):+.3f} over {len(values)} timings")
    for waves, values in sorted(by_waves.items()):
        print(f"  waves <= {waves:g}: median {statistics.median(values):+.3f} over {len(values)} timings")


def twins(profile_path: str, paths: list[str]) -> None:
    """Every split-K timing of the sweeps (aligned operands) beside its persistent twin (same tile, BLOCK_K, warps and
    stages) on the same shape: measured minus the model's (split-K less twin), in us, median by output-tile elements,
    waves and split; a split-K term the model misses shows here without the other variants' errors."""
    from harness import aligned_sweep_shapes

    excess: dict[tuple[int, str, int], list[float]] = defaultdict(list)
    by_workspace: dict[str, list[float]] = defaultdict(list)  # multi-wave pairs by the partials' bytes over the L2's
    for shape in aligned_sweep_shapes(profile_path, paths):
        table, measured, times, terms, legal = shape.table, shape.measured, shape.times, shape.terms, shape.legal
        for key, seconds in measured.items():
            twin = "persistent/" + "/".join(key.split("/")[1:-1]) + "/k1"
            if not key.startswith("splitk/") or twin not in measured or twin not in table.index:
                continue
            i, j = table.index.get(key), table.index[twin]
            if i is None or not (legal[i] and legal[j]):
                continue
            config = table.configs[i]
            waves = terms["#waves"][i]
            band = "1" if waves <= 1 else "2-3" if waves <= 3 else "4+"
            over = (seconds - measured[twin]) - (times[i] - times[j])
            excess[(config.block_m * config.block_n, band, min(config.split_k, 16))].append(over * 1e6)
            if waves > 1:
                workspace = terms["#tiles"][i] * config.split_k * config.block_m * config.block_n * 4
                share = workspace / table.hw.l2_effective_bytes
                by_workspace["<= 1/4" if share <= 0.25 else "<= 1" if share <= 1 else "> 1"].append(over * 1e6)
    print("split-K less its persistent twin, measured minus the model's (us), median:")
    for (elems, band, split), values in sorted(excess.items()):
        if len(values) >= 10:
            print(
                f"  {elems:5d}-element tiles, {band:3s} waves, split {split:2d}: {statistics.median(values):+6.2f} us"
                f" over {len(values)} pairs"
            )
    print("over more than one wave, by the split's fp32 partials over the profile's effective L2:")
    for band in ("<= 1/4", "<= 1", "> 1"):
        if by_workspace[band]:
            print(f"  {band:6s}: {statistics.median(by_workspace[band]):+6.2f} us over {len(by_workspace[band])} pairs")


if __name__ == "__main__":
    from harness import dispatch

    if len(sys.argv) > 1 and sys.argv[1] == "--twins":
        twins(sys.argv[2], sys.argv[3:])
    else:
        dispatch(run, summary, sweeps)
