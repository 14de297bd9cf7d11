"""One tile, few K-steps: why does a flattened TMA 64x64x128 beat the 16-row pointer tile the model prefers?

Over the H200 sweeps (seen, read and out of sample, 3,134 shapes) the largest single pair in the selection's loss is
`persistent/16x64x128` picked where `tma/64x64x128` flattened ran fastest: 67 shapes, 4% of the summed loss, all one
program on one SM over 1-11 K-steps (1x16x512 nt: 4.1 against 3.2 us, priced 3.5 against 4.1).  The model charges the
TMA build its launch extra (the tma-launch probe's) and both the same pipeline fill, and finds the pointer tile
cheaper by 0.4-0.8 us where it runs 0.2-0.9 us slower.  This times one tile of each of five builds (the 16-row
pointer tile, the TMA one flattened, the pointer 64x64x128 flattened, 16x64x32 at 2 stages and TMA 64x128x64) over 1
to 16 K-steps of 128, at M 1, 16 and 64 and N 16 and 64, layouts nt and nn, bf16, graph-timed as validation times
such shapes.

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/tiny_tiles.py          # GPU: $OUT/tiny-tiles-{nt,nn}.json (~1 min)
    PYTHONPATH=$PWD python3 experiments/tiny_tiles.py --summary F.json PROFILE   # no GPU: measured beside the model

H200, 2026-11-29 (``experiments/tiny-tiles-{nt,nn}-h200.json``): past one K-step the TMA tile is the faster, by 0.4
us at 4 K-steps and 1.6-2.0 at 16, where the model has it 0.4-0.9 us slower (TMA minus pointer, median over M and N:
1 step +0.18 measured / +0.20 model, 4 -0.39 / +0.61, 8 -1.00 / +0.71, 16 -2.01 / +0.90, nt).  Per 128-deep K-step a
lone TMA 64x64x128 tile takes 0.21 us against the model's 0.33 (its one-SM stream ceiling for TMA copies binds it:
32 KB a step at ~97 GB/s), the 16-row pointer tile 0.26 against 0.28, TMA 64x128x64 0.17 a 64-deep step against
0.31.  The fixed costs agree (1 K-step within 0.1 us); it is the lone TMA tile's streaming rate the model undercounts.
"""

from __future__ import annotations

import os
import statistics
from collections import defaultdict

SHAPES = [(f"m{m}n{n}k{k}", m, n, k) for m in (1, 16, 64) for n in (16, 64) for k in (128, 512, 1024, 2048)]
CONFIGS = (
    "persistent/16x64x128/g8/w4/s4/k1", "tma/64x64x128/g8/w4/s4/k1/f", "persistent/64x64x128/g8/w4/s4/k1/f",
    "persistent/16x64x32/g8/w4/s2/k1", "tma/64x128x64/g8/w4/s4/k1",
)  # fmt: skip
PAIR = (CONFIGS[1], CONFIGS[0])  # TMA flattened minus the 16-row pointer tile


def run(out: str) -> None:
    from harness import bench_configs

    for layout in ("nt", "nn"):
        bench_configs(SHAPES, CONFIGS, os.path.join(out, f"tiny-tiles-{layout}.json"), "bf16", layout)


def summary(path: str, profile_path: str) -> None:
    """Each shape's timings (model in brackets), then the TMA-minus-pointer difference by K-steps, measured and
    modelled (median over M and N)."""
    from harness import benched_shapes

    gaps: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for shape in benched_shapes(path, profile_path, CONFIGS):
        row, found = shape.row, shape.times
        cells = ", ".join(f"{key.split('/')[0][:4]} {key.split('/')[1]}{'/f' if key.endswith('/f') else ''} "
                          f"{m:.2f} ({p:.2f})" for key, (m, p) in found.items())  # fmt: skip
        print(f"{row['M']}x{row['N']}x{row['K']} {shape.layout}: {cells}")
        if all(key in found for key in PAIR):
            steps = -(-row["K"] // 128)
            gaps[steps].append((found[PAIR[0]][0] - found[PAIR[1]][0], found[PAIR[0]][1] - found[PAIR[1]][1]))
    print(f"{PAIR[0]} minus {PAIR[1]} (us), median over M and N:")
    for steps, pairs in sorted(gaps.items()):
        measured = statistics.median(p[0] for p in pairs)
        model = statistics.median(p[1] for p in pairs)
        print(f"  {steps:3d} K-steps: measured {measured:+.2f}, model {model:+.2f} ({len(pairs)} shapes)")


if __name__ == "__main__":
    from harness import dispatch

    dispatch(run, summary)
