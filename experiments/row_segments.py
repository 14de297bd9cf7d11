"""Do weight streams whose B rows are 64-byte segments a K-step run slower than the model says, and is it the rows?

Within each shape of the seen H200 decode sweeps (nt), pointer tiles under 64 rows whose B rows are 64-byte segments
a K-step run over their price (bf16 BLOCK_K 32 +0.23 in log against the shape's median, fp8 BLOCK_K 64 +0.41), while
128- and 256-byte rows do not (docs/model.md, known defects).  Two causes fit: the HBM reading 64-byte segments of many
rows slower than its bytes say (the short-rows probe compares 128 against 256 bytes only), or a K-step's fixed cost
(the loop overhead solves at its bound, 0.5 cycles).  This times weight streams (M 1, 8, 16; nt) with 16-row tiles at
four BLOCK_K (64- to 512-byte rows, four stages: the steps' count changes with the rows) and 64-row tiles at three
BLOCK_K with equal bytes in flight (stages x BLOCK_K fixed: only the rows change), in bf16 and fp8 e4m3.

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/row_segments.py     # GPU: $OUT/row-segments-{bf16,fp8e4m3}-GPU.json
    PYTHONPATH=$PWD python3 experiments/row_segments.py --summary F.json PROFILE   # no GPU: by row bytes

H200, 2026-11-29 (``experiments/row-segments-{bf16,fp8e4m3}-h200.json``): not the rows.  64-row tiles at equal bytes
in flight read +0.21 / -0.01 / -0.17 (bf16) and +0.18 / +0.00 / -0.20 (fp8) at 64- / 128- / 256-byte rows against
the shape's median, while their measured times stay within ~10% of each other: the bytes in flight set the rate and
the model's latency hiding, which grows with the stages, prices the deep short steps too fast.  16-row tiles at four
stages: within +-0.02 (bf16), -0.09 to +0.08 (fp8).
"""

from __future__ import annotations

import json
import math
import os
import statistics
from collections import defaultdict

WEIGHTS = ((8192, 8192), (28672, 4096), (4096, 14336))  # (N, K) as nn.Linear's [out, in]
ROWS = (1, 8, 16)
SHAPES = [(f"m{m}n{n}k{k}", m, n, k) for m in ROWS for n, k in WEIGHTS]
ELEMENT_BYTES = {"bf16": 2, "fp8e4m3": 1}
# BLOCK_K for 64-, 128-, 256- and 512-byte rows; the 64-row tiles' stages keep stages x BLOCK_K (bytes in flight) fixed
BLOCK_KS = {"bf16": (32, 64, 128, 256), "fp8e4m3": (64, 128, 256, 512)}
EQUAL_FLIGHT = {"bf16": ((32, 12), (64, 6), (128, 3)), "fp8e4m3": ((64, 12), (128, 6), (256, 3))}


def configs(dtype: str) -> list[str]:
    small = [f"persistent/16x64x{bk}/g8/w4/s4/k1" for bk in BLOCK_KS[dtype]]
    wide = [f"persistent/64x64x{bk}/g8/w4/s{stages}/k1" for bk, stages in EQUAL_FLIGHT[dtype]]
    return small + wide


def run(out: str) -> None:
    from harness import bench_configs, gpu_name

    for dtype in ("bf16", "fp8e4m3"):
        path = os.path.join(out, f"row-segments-{dtype}-{gpu_name()}.json")
        bench_configs(SHAPES, configs(dtype), path, dtype, "nt")


def summary(path: str, profile_path: str) -> None:
    """Per config, log(measured / predicted) less the shape's median over these configs, grouped by tile rows and the
    B row's bytes a K-step; and each shape's measured times beside the model's."""
    from theodolite.kernels.config import GemmConfig, Problem
    from theodolite.model.predict import ConfigTable, evaluate

    from theodolite.profile.hdf5 import load_profile

    with open(path) as stream:
        data = json.load(stream)
    dtype = data["settings"]["dtype"]
    keys = configs(dtype)
    table = ConfigTable(load_profile(profile_path), dtype, extra=tuple(GemmConfig.from_key(key) for key in keys))
    groups: dict[tuple[int, int], list[float]] = defaultdict(list)
    for shape in data["shapes"]:
        times, _ = evaluate(table, Problem(shape["M"], shape["N"], shape["K"], dtype=dtype, layout="nt"))
        rows = [(key, ms * 1e-3, float(times[table.index[key]])) for key, ms in shape["configs"].items() if ms]
        if len(rows) < 3:
            continue
        middle = statistics.median(math.log(s / p) for _, s, p in rows)
        print(f"{shape['M']}x{shape['N']}x{shape['K']} nt {dtype}: "
              + ", ".join(f"{key.split('/')[1]} s{GemmConfig.from_key(key).num_stages} {s * 1e6:.1f} ({p * 1e6:.1f})"
                          for key, s, p in rows))  # fmt: skip
        for key, s, p in rows:
            config = GemmConfig.from_key(key)
            groups[(config.block_m, config.block_k * ELEMENT_BYTES[dtype])].append(math.log(s / p) - middle)
    print(f"{dtype}: log(measured / predicted) less the shape's median, by tile rows and B row bytes a K-step:")
    for (rows_, row_bytes), values in sorted(groups.items()):
        print(f"  {rows_:3d}-row tiles, {row_bytes:4d}-byte rows: {statistics.median(values):+.3f} over {len(values)}")


if __name__ == "__main__":
    from harness import dispatch

    dispatch(run, summary)
