"""Do K-major weight rows that are only 8- or 4-byte aligned stream slower in wide tiles than the model says?

Committed sweeps show it on decode shapes with misaligned K in layout nt (B's rows along K, read as 8- or 4-byte
vectors): 1x108680x1660 ran its 16x256x64 pick at 0.60 of the best (64x64 tiles), and over 19 such shapes the model's
error grows with BLOCK_N.  This times one weight stream (M = 1, nt, whole waves of 256-column tiles) with K aligned
(16-byte rows), 8-byte and 4-byte aligned, in tiles 64 to 256 columns wide, torch side by side.

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/misaligned_rows.py   # GPU: $OUT/misaligned-rows*-GPU.json
    PYTHONPATH=$PWD python3 experiments/misaligned_rows.py --summary F.json PROFILE   # no GPU
"""

from __future__ import annotations

import json
import math
import os

N_SHORT, N_LONG = 132 * 256 * 3, 132 * 256  # three whole waves of 256-wide tiles (short K), one (long K)
SHAPES = [(f"k{k}", 1, N_SHORT, k) for k in (1664, 1660, 1658)]
SHAPES += [(f"k{k}", 1, N_LONG, k) for k in (16384, 16380, 16378)]
CONFIGS = ("persistent/16x256x64/g8/w4/s4/k1", "persistent/16x128x128/g8/w4/s4/k1", "persistent/16x64x128/g8/w4/s4/k1",
           "persistent/64x64x64/g8/w4/s4/k1", "streamk/64x64x64/g8/w4/s4/k1")  # fmt: skip


# what the rate follows: stages (in-flight bytes and shared memory, so the L1 left), BLOCK_K (row segment length) at
# one tile width, one long-K stream at each alignment; and B's rows along N (nn: N misaligned) for comparison
STAGE_SHAPES = [(f"k{k}", 1, N_LONG, k) for k in (16384, 16380)]
STAGE_CONFIGS = tuple(f"persistent/{tile}/g8/w4/s{stages}/k1" for tile, stages in (
    ("16x64x128", 2), ("16x64x128", 3), ("16x64x128", 6), ("16x256x64", 2), ("16x64x64", 4), ("16x64x256", 3),
    ("16x128x128", 2)))  # fmt: skip
NN_SHAPES = [(f"n{n}", 1, n, 16384) for n in (N_LONG, N_LONG - 4)]  # 16-byte and 8-byte rows along N


def run(out: str) -> None:
    from harness import bench_configs, gpu_name

    gpu = gpu_name()
    bench_configs(SHAPES, CONFIGS, os.path.join(out, f"misaligned-rows-{gpu}.json"), "bf16", "nt")
    bench_configs(STAGE_SHAPES, STAGE_CONFIGS, os.path.join(out, f"misaligned-rows-stages-{gpu}.json"), "bf16", "nt")
    bench_configs(NN_SHAPES, CONFIGS, os.path.join(out, f"misaligned-rows-nn-{gpu}.json"), "bf16", "nn")


def summary(path: str, profile_path: str) -> None:
    """Each config's time (us) and the weight's read rate, with the model's time beside it (layout nn where the file's
    name says so)."""
    from theodolite.kernels.config import Problem, load_widths
    from theodolite.model.predict import evaluate, table_for

    from theodolite.profile.hdf5 import load_profile

    with open(path) as stream:
        shapes = json.load(stream)["shapes"]
    layout = "nn" if "-nn" in os.path.basename(path) else "nt"
    keys = sorted({key for shape in shapes for key in shape["configs"]}, key=lambda k: (k.split("/")[1], k))
    table = table_for(load_profile(profile_path), "bf16")
    for shape in shapes:
        m, n, k = shape["M"], shape["N"], shape["K"]
        problem = Problem(m, n, k, layout=layout)
        times = evaluate(table, problem)[0]
        widths = load_widths(problem)
        print(f"{m}x{n}x{k} {layout}: rows {min(widths)} B, torch {shape.get('torch_ms', math.nan) * 1e3:.1f} us")
        for key in keys:
            ms = shape["configs"].get(key)
            us = ms * 1e3 if ms else math.nan
            rate = n * k * 2 / (us * 1e-6) / 1e12 if ms else math.nan
            model = times[table.index[key]] * 1e6 if key in table.index else math.nan
            print(f"  {key:36s} {us:7.1f} us {rate:5.2f} TB/s  (model {model:6.1f})")
    print("cells: measured us, the weight's read rate (model us)")


def sweeps(profile_path: str, paths: list[str]) -> None:
    raise SystemExit("misaligned_rows.py has no --sweeps mode (see docs/model.md's known defects)")


if __name__ == "__main__":
    from harness import dispatch

    dispatch(run, summary, sweeps)
