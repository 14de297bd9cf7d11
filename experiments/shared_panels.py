"""Do a wave's reads of a K-panel that other tiles also read wait as long as a miss?

The model mixes a K-step's latency from the L2's and the HBM's by the wave's miss share: of the tiles in flight that
read one A row panel or B column panel, all but one count as L2 hits.  The tiles of a wave walk K in lockstep, so
those reads may arrive while the first one's miss is still in flight and wait nearly as long.  A lone tile (every read
a miss) runs its K-steps as if its prefetched copies hid the whole latency, while the stages probe's 8 tiles, 62% of
their reads shared, solve the hiding share at 0.72 (docs/model.md, known defects: shared panels).  This times one
wave of the same tile over long K on grids that share differently, at the same number of tiles where it can: one
tile, 8 tiles in a row (A shared eight ways), in a column (B shared), as 2x4, and 64 tiles as 8x8; pointer-based
64x64x64 at 4 and 8 stages and TMA 64x128x64 at 4 and 8, layout nn, bf16.  Each pair of K (4096, 16384) gives a
K-step's time with the fixed costs cancelled; the summary sets it beside the model's and the grid's miss share.

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/shared_panels.py          # GPU: $OUT/shared-panels.json (~1 min)
    PYTHONPATH=$PWD python3 experiments/shared_panels.py --summary F.json PROFILE   # no GPU: per grid and config

H200, 2026-11-29 (``experiments/shared-panels-h200.json``): the K-step does not follow the miss share.  Pointer
64x64x64 at 4 stages runs 0.242-0.258 us a step on every grid (one tile alone, every read a miss: 0.258; 8x8, 12%
misses: 0.245), at 8 stages 0.154-0.171; TMA 64x128x64 at 4 stages 0.262-0.287, at 8 stages 0.166-0.182.  Shared
reads do not wait a miss's latency, or not so that a step shows it: nothing for a share s to stand on.  The model
prices the 4-stage steps within 5% but the lone pointer tile (0.289, +12%) and the 8-stage ones up to 14% (pointer,
0.177) and 46% (TMA, 0.242) slow: the TMA 8-stage step runs at its matrix instructions' time (0.166), where the model's
shared-memory term, which counts the copies' writes beside the instructions' reads, binds it.
"""

from __future__ import annotations

import os
from collections import defaultdict

KS = (4096, 16384)
# (name, tiles along M, tiles along N) of the 64x64 tile; the TMA 64x128 tile takes N twice as wide
GRIDS = (("one", 1, 1), ("row8", 1, 8), ("col8", 8, 1), ("grid2x4", 2, 4), ("grid8x8", 8, 8))
CONFIGS = {
    "persistent/64x64x64/g8/w4/s4/k1": 64,
    "persistent/64x64x64/g8/w4/s8/k1": 64,
    "tma/64x128x64/g8/w4/s4/k1": 128,
    "tma/64x128x64/g8/w4/s8/k1": 128,
}  # key: its tile's N


def shapes() -> list[tuple[str, int, int, int]]:
    """(name, M, N, K): each grid at each K, once for the 64-wide and once for the 128-wide tile."""
    out = []
    for width in sorted(set(CONFIGS.values())):
        for name, tm, tn in GRIDS:
            out += [(f"{name}-n{width}-k{k}", 64 * tm, width * tn, k) for k in KS]
    return out


def run(out: str) -> None:
    from harness import bench_configs

    bench_configs(shapes(), list(CONFIGS), os.path.join(out, "shared-panels.json"), "bf16", "nn")


def summary(path: str, profile_path: str) -> None:
    """Per grid and config: the measured K-step (the two K's difference over their steps), the model's, and the
    model's miss share of the grid's reads."""
    from harness import benched_shapes
    from theodolite.kernels.config import GemmConfig

    tiles_n = {name: tn for name, _, tn in GRIDS}
    found: dict[tuple[str, str], dict[int, tuple[float, float, float]]] = defaultdict(dict)
    for shape in benched_shapes(path, profile_path, list(CONFIGS)):
        row = shape.row
        grid = row["name"].split("-")[0]
        for key, (measured, model) in shape.times.items():
            # each shape is timed with every config; keep the ones whose tile makes the shape this grid
            if CONFIGS[key] == row["N"] // tiles_n[grid]:
                found[(grid, key)][row["K"]] = (measured, model, 1.0 - shape.term(key, "#l2_hit"))
    print(f"{'grid':8s} {'config':34s} {'miss':>5s}  K-step measured / model (us)")
    for (grid, key), by_k in sorted(found.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        if not all(k in by_k for k in KS):
            continue
        steps = (KS[1] - KS[0]) // GemmConfig.from_key(key).block_k
        measured = (by_k[KS[1]][0] - by_k[KS[0]][0]) / steps
        model = (by_k[KS[1]][1] - by_k[KS[0]][1]) / steps
        print(f"{grid:8s} {key:34s} {by_k[KS[1]][2]:5.2f}  {measured:.3f} / {model:.3f}")


if __name__ == "__main__":
    from harness import dispatch

    dispatch(run, summary)
