"""Short K, large outputs: does one resident program's tile cost what the model says, beside four smaller ones?

Out of sample (`wide:300:312004`, `291820`) the model picks `persistent/256x128x16` (8 warps, one program an SM) on
outputs of K 16-28 where 128x64x16 (four programs an SM) runs 1.2-1.3x faster: 10613x7552x16 nn measured 64.6 us
against 50.5, priced 50.9 against 56.4; the model takes the wave's output writes and each item's fixed costs alike
for both, so what one program an SM leaves unoverlapped (its epilogue's conversion and stores beside the next tile's
loads) is the suspect.  This times those two tiles, 64x64x16, 128x128x16 and 256x64x16 (off the space: more rows of
residency), the flattened 128x128x64 and TMA 128x256x64 that win elsewhere, over outputs of one to many waves at K
16, 32 and 64, layouts nn and nt, bf16.

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/short_k_outputs.py   # GPU: $OUT/short-k-outputs-{nn,nt}.json, ~2 min
    PYTHONPATH=$PWD python3 experiments/short_k_outputs.py --summary F.json PROFILE   # no GPU: log(measured / model)

H200, 2026-11-29 (``experiments/short-k-outputs-{nn,nt}-h200.json``): log(measured / model) less the shape's median,
over the 15 shapes of a layout (nt / nn): 256x128x16, one program an SM, +0.09 / +0.14; 256x64x16 (two) +0.04 /
+0.08; 128x128x16 (two) 0.00; 128x64x16 (four) -0.13 / -0.09; 64x64x16 (four) -0.19 / -0.16; the flattened 128x128x64
and TMA 128x256x64 within 0.05.  The fewer programs an SM holds, the more the model underprices them: 16384x16384x16
nt 256x128x16 216.7 us (priced 166.7) against 128x64x16 166.3 (186.6).  The class is residency, not the tile.
"""

from __future__ import annotations

import math
import os
import statistics
from collections import defaultdict

OUTPUTS = ((10613, 7552), (4096, 4096), (2048, 8192), (640, 8031), (16384, 16384))
KS = (16, 32, 64)
SHAPES = [(f"m{m}n{n}k{k}", m, n, k) for m, n in OUTPUTS for k in KS]
CONFIGS = (
    "persistent/256x128x16/g8/w8/s2/k1", "persistent/128x64x16/g8/w4/s2/k1", "persistent/64x64x16/g8/w4/s2/k1",
    "persistent/128x128x16/g8/w8/s2/k1", "persistent/256x64x16/g8/w8/s2/k1", "persistent/128x128x64/g8/w8/s3/k1/f",
    "tma/128x256x64/g8/w8/s3/k1/f",
)  # fmt: skip


def run(out: str) -> None:
    from harness import bench_configs

    for layout in ("nn", "nt"):
        bench_configs(SHAPES, CONFIGS, os.path.join(out, f"short-k-outputs-{layout}.json"), "bf16", layout)


def summary(path: str, profile_path: str) -> None:
    """Each shape's timings beside the model's, then per config the median of log(measured / model) less the
    shape's median and the model's resident programs an SM."""
    from harness import benched_shapes

    residuals: dict[str, list[float]] = defaultdict(list)
    resident: dict[str, int] = {}
    for shape in benched_shapes(path, profile_path, CONFIGS):
        row = shape.row
        logs = {key: math.log(measured / model) for key, (measured, model) in shape.times.items()}
        for key in shape.times:
            resident[key] = int(shape.term(key, "#resident_per_sm"))
        cells = ", ".join(f"{key.split('/')[1]} {m:.1f} ({p:.1f})" for key, (m, p) in shape.times.items())
        print(f"{row['M']}x{row['N']}x{row['K']} {shape.layout}: {cells}")
        if len(logs) >= 3:
            median = statistics.median(logs.values())
            for key, value in logs.items():
                residuals[key].append(value - median)
    print("log(measured / model) less the shape's median:")
    for key in CONFIGS:
        if residuals[key]:
            print(f"  {key:38s} {resident[key]} an SM: {statistics.median(residuals[key]):+.3f} over "
                  f"{len(residuals[key])}")  # fmt: skip


if __name__ == "__main__":
    from harness import dispatch

    dispatch(run, summary)
