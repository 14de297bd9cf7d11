"""Do element-wise weight streams cost what the model says, by the row segment a K-step reads and the stages?

Out of sample (`wide:300:780814`, H200, 2026-11-29), 64x85067x4425 nt picks `persistent/64x64x32` s2 (predicted 385 us)
and runs 972 us, where `persistent/64x32x128` s4 runs 481 (predicted 440): 0.495 of the best.  K is odd, so B's rows
([N, K], K-major) take no vector and are read element-wise (load class `scalar-b`, A copied), and the whole problem is
one 752 MB stream of B.  The model prices that element-wise stream by the loads each thread issues; the 64x64x32 tile
reads 64-byte row segments a K-step with one step in flight, the 64x32x128 one 256-byte segments with three.  Within the
seen H200 sweeps the same config reads -0.06 (log, near-best configs, vector loads) against the shape's median, so
this is the element-wise class, not the config.  This times weight streams with element-wise B (M 16 and 64; N 16k to
85k; K odd; nt) through 64- and 16-row tiles that vary BLOCK_K (32-byte to 512-byte segments) and the stages, and one
aligned control (K even) of the same sizes.

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/scalar_streams.py    # GPU (~2 min): $OUT/scalar-streams-GPU.json
    PYTHONPATH=$PWD python3 experiments/scalar_streams.py --summary F.json PROFILE   # no GPU: by segment and stages

To be run.
"""

from __future__ import annotations

import math
import os
import statistics
from collections import defaultdict

WEIGHTS = ((85067, 4425), (28672, 4097), (16383, 8193), (28672, 4096))  # (N, K); the last is the aligned control
ROWS = (16, 64)
SHAPES = [(f"m{m}n{n}k{k}", m, n, k) for m in ROWS for n, k in WEIGHTS]
CONFIGS = (
    "persistent/64x64x16/g8/w4/s2/k1",
    "persistent/64x64x32/g8/w4/s2/k1",
    "persistent/64x64x64/g8/w4/s4/k1",
    "persistent/64x64x64/g8/w4/s8/k1",
    "persistent/64x32x128/g8/w4/s4/k1",
    "persistent/64x64x128/g8/w4/s6/k1",
    "streamk/64x64x64/g8/w4/s4/k1",
    "persistent/16x64x32/g8/w4/s2/k1",
    "persistent/16x64x128/g8/w4/s4/k1",
    "persistent/16x64x256/g8/w4/s4/k1",
)


def run(out: str) -> None:
    from harness import bench_configs, gpu_name

    bench_configs(SHAPES, CONFIGS, os.path.join(out, f"scalar-streams-{gpu_name()}.json"), "bf16", "nt")


def summary(path: str, profile_path: str) -> None:
    """Each shape's measured and predicted times, then log(measured / predicted) less the shape's median, grouped by
    tile rows, the B row segment a K-step reads (bytes) and the stages, element-wise shapes apart from the control."""
    from harness import benched_shapes
    from theodolite.kernels.config import GemmConfig

    groups: dict[tuple[bool, int, int, int], list[float]] = defaultdict(list)
    for shape in benched_shapes(path, profile_path, CONFIGS):
        row = shape.row
        if len(shape.times) < 3:
            continue
        aligned = row["K"] % 8 == 0
        middle = statistics.median(math.log(s / p) for s, p in shape.times.values())
        print(f"{row['M']}x{row['N']}x{row['K']} nt{' (aligned)' if aligned else ''}: "
              + ", ".join(f"{key.split('/')[1]} s{GemmConfig.from_key(key).num_stages} {s:.1f} ({p:.1f})"
                          for key, (s, p) in shape.times.items()))  # fmt: skip
        for key, (s, p) in shape.times.items():
            config = GemmConfig.from_key(key)
            groups[(aligned, config.block_m, 2 * config.block_k, config.num_stages)].append(math.log(s / p) - middle)
    print("log(measured / predicted) less the shape's median, by B loads, tile rows, row segment bytes, stages:")
    for (aligned, rows, segment, stages), values in sorted(groups.items()):
        kind = "vector " if aligned else "element"
        print(
            f"  {kind} {rows:3d}-row tiles, {segment:4d}-byte segments, s{stages:<2d}: "
            f"{statistics.median(values):+.3f} over {len(values)}"
        )


if __name__ == "__main__":
    from harness import dispatch

    dispatch(run, summary)
