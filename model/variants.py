"""Cost structure of each kernel variant (the formulas live in ``core.cost``; this is their map).

- persistent / tma: ``min(tiles, SMs x programs_per_sm)`` programs loop over tiles in grouped
  order; one launch.  TMA loads cost no load-issue slots (one descriptor copy per tile step).
- streamk: full waves of tiles data-parallel; each tile of the last partial wave cut into equal K-slices
  (``kernels.config.streamk_partition``), one program each, whose fp32 partials the slices reduce in the
  same launch (each its share of the tile's row chunks).
- splitk: a (tiles x split_k) grid writes fp32 partials to a workspace; the last slice of a tile to
  arrive adds them in order and writes the output, in the same launch.
Split-K's workspace traffic runs at L2 bandwidth while it fits the effective L2, at HBM bandwidth beyond.
"""

from __future__ import annotations

from theodolite.kernels.config import GemmConfig


def describe(config: GemmConfig) -> str:
    """One line on how a config's time is put together."""
    if config.variant == "splitk":
        return f"{config.split_k} K-slices per tile, fp32 partials reduced by the last slice to arrive"
    if config.variant == "streamk":
        return "data-parallel full waves, the last wave's tiles in aligned K-slices reduced in the same launch"
    if config.variant == "tma":
        return "persistent tiles, TMA loads (no load-issue cost)"
    return "persistent tiles, pointer loads (load-issue cost)"
