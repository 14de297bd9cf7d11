"""Where selection loses: a suite's missed picks grouped by what the model picked against what ran fastest.

A validation's geomean says how much is lost, not where.  Grouping the picks that missed by the kind of config picked
and the kind that won (variant, flattened loop, composite tile), by the tiles themselves, or by the problem's rows,
shows which part of the model a port should look at first: the group whose summed log efficiency is largest costs the
geomean most.  The tile pairs name one mispricing each (H200 sweeps: the 16-row pointer tile picked where a flattened
TMA 64x64x128 ran fastest is the largest pair, one tile over a few K-steps).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

ROW_BANDS = (1, 16, 64, 512)  # M bands: 1, 2-16, 17-64, 65-512, above (decode to prefill)


class Scored(Protocol):
    """What a grouping reads of one shape's score (model.evaluate.ShapeScore has it)."""

    M: int
    pick: str
    best: str
    efficiency: float


@dataclass(frozen=True)
class LossGroup:
    group: str
    missed: int  # picks in the group that are not the fastest config
    loss: float  # -sum(log efficiency) over them
    share: float  # of the suite's whole loss
    geomean_gain: float  # the suite's geomean, were these picks the fastest, over what it is


def config_kind(key: str) -> str:
    """A config key's kind: its variant, ``+`` for a composite tile, ``/f`` for a flattened loop
    (``tma/128x256+64x64/g8/w8/s3/k1`` -> ``tma+``, ``persistent/64x64x64/g8/w4/s4/k1/f`` -> ``persistent/f``)."""
    parts = key.split("/")
    kind = parts[0] + ("+" if len(parts) > 1 and "+" in parts[1] else "")
    return kind + ("/f" if parts[-1] == "f" else "")


def config_tile(key: str) -> str:
    """A config key's variant and tile, ``/f`` for a flattened loop: what a pick is without its warps, stages and
    split (``persistent/16x64x128/g8/w4/s4/k1`` -> ``persistent/16x64x128``)."""
    parts = key.split("/")
    return "/".join(parts[:2]) + ("/f" if parts[-1] == "f" else "")


def by_kind(score: Scored) -> str:
    return f"{config_kind(score.pick)} -> {config_kind(score.best)}"


def by_tile(score: Scored) -> str:
    return f"{config_tile(score.pick)} -> {config_tile(score.best)}"


def by_rows(score: Scored) -> str:
    low = 1
    for high in ROW_BANDS:
        if high >= score.M:
            return f"M {low}" if low == high else f"M {low}-{high}"
        low = high + 1
    return f"M > {ROW_BANDS[-1]}"


GROUPINGS: dict[str, Callable[[Scored], str]] = {"kind": by_kind, "tiles": by_tile, "rows": by_rows}


def selection_losses(scores: Sequence[Scored], group: Callable[[Scored], str] = by_kind) -> list[LossGroup]:
    """The missed picks (efficiency below 1) grouped by ``group``, largest loss first.  Shapes whose pick was not
    measured (efficiency nan) are left out of the loss and of the count the geomean is taken over."""
    measured = [s for s in scores if math.isfinite(s.efficiency) and s.efficiency > 0]
    losses: dict[str, list[float]] = {}
    for score in measured:
        if score.efficiency < 1.0:
            losses.setdefault(group(score), []).append(-math.log(score.efficiency))
    total = sum(sum(values) for values in losses.values())
    rows = [
        LossGroup(name, len(values), sum(values), sum(values) / total if total else 0.0,
                  math.exp(sum(values) / len(measured)))
        for name, values in losses.items()
    ]  # fmt: skip
    return sorted(rows, key=lambda row: (-row.loss, row.group))


def format_losses(scores: Sequence[Scored], grouping: str = "kind", top: int = 12) -> str:
    """The table ``python -m theodolite.model.evaluate --losses`` prints."""
    if grouping not in GROUPINGS:
        raise ValueError(f"unknown grouping {grouping!r}: choose from {', '.join(GROUPINGS)}")
    rows = selection_losses(scores, GROUPINGS[grouping])
    lines = [f"where selection loses, by {grouping} (missed picks; loss = -sum log efficiency):"]
    if not rows:
        lines.append("  every measured pick is the fastest config")
    width = max((len(row.group) for row in rows[:top]), default=0)
    for row in rows[:top]:
        lines.append(
            f"  {row.group:<{width}} missed {row.missed:5d}  loss {row.loss:7.3f}  share {row.share:6.1%}"
            f"  geomean x{row.geomean_gain:.4f} were they the best"
        )
    return "\n".join(lines)
