"""Cost structure of each kernel variant (the formulas live in ``core.cost``; this is their map).

- persistent / tma: ``min(tiles, SMs x programs_per_sm)`` programs loop over tiles in grouped
  order; one launch.  TMA loads cost no load-issue slots (one descriptor copy per tile step).
- streamk: full waves of tiles data-parallel; the remaining tiles' K-iterations split evenly over
  all programs, each storing at most two fp32 partial tiles; a second kernel adds the partials.
- splitk: a (tiles x split_k) grid writes fp32 partials to a workspace; a reduction kernel adds
  them in order and writes the output.
The workspace traffic of the second kernels runs at L2 bandwidth while it fits the effective L2,
at HBM bandwidth beyond.
"""

from __future__ import annotations

from theodolite.kernels.config import GemmConfig

SECOND_KERNEL = {"persistent": False, "tma": False, "streamk": True, "splitk": True}


def describe(config: GemmConfig) -> str:
    """One line on how a config's time is put together."""
    if config.variant == "splitk":
        return f"{config.split_k} K-slices per tile, fp32 partials, then a reduction kernel"
    if config.variant == "streamk":
        return "data-parallel full waves, the remainder's K-iterations shared by all programs, then a fix-up kernel"
    if config.variant == "tma":
        return "persistent tiles, TMA loads (no load-issue cost)"
    return "persistent tiles, pointer loads (load-issue cost)"
