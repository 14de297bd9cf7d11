"""Where selection loses: missed picks grouped and summed (model.selection_loss), and evaluate --losses."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
from theodolite.model.selection_loss import (
    by_kind,
    by_rows,
    by_tile,
    config_kind,
    config_tile,
    format_losses,
    selection_losses,
)


@dataclass
class Score:
    M: int
    pick: str
    best: str
    efficiency: float


TMA_FLAT = "tma/128x256x64/g8/w8/s3/k1/f"
TMA_COMPOSITE = "tma/128x256+64x64/g8/w8/s3/k1"
PLAIN = "persistent/64x64x64/g8/w4/s4/k1"
SPLIT = "splitk/16x64x128/g8/w4/s4/k4"


def test_config_kind_marks_flattened_loops_and_composite_tiles() -> None:
    assert config_kind(TMA_FLAT) == "tma/f"
    assert config_kind(TMA_COMPOSITE) == "tma+"
    assert config_kind(PLAIN) == "persistent"
    assert config_kind("persistent/64x64x64/g8/w4/s4/k1/f") == "persistent/f"
    assert config_kind(SPLIT) == "splitk"


def test_losses_sum_the_missed_picks_by_group_largest_first() -> None:
    scores = [
        Score(8, PLAIN, TMA_FLAT, 0.5),
        Score(8, PLAIN, TMA_FLAT, 0.8),
        Score(4096, SPLIT, PLAIN, 0.9),
        Score(64, PLAIN, PLAIN, 1.0),  # the fastest: no loss
    ]
    rows = selection_losses(scores, by_kind)
    assert [row.group for row in rows] == ["persistent -> tma/f", "splitk -> persistent"]
    first, second = rows
    assert first.missed == 2 and second.missed == 1
    assert first.loss == pytest.approx(-math.log(0.5) - math.log(0.8))
    assert second.loss == pytest.approx(-math.log(0.9))
    assert first.share + second.share == pytest.approx(1.0)
    # the geomean over all four measured shapes, were the group's picks the fastest, over what it is
    geomean = math.exp(sum(math.log(s.efficiency) for s in scores) / len(scores))
    fixed = math.exp((math.log(0.9) + math.log(1.0)) / len(scores))
    assert first.geomean_gain == pytest.approx(fixed / geomean)


def test_unmeasured_picks_count_nowhere() -> None:
    scores = [Score(1, PLAIN, SPLIT, math.nan), Score(1, PLAIN, SPLIT, 0.5)]
    (row,) = selection_losses(scores)
    assert row.missed == 1
    assert row.geomean_gain == pytest.approx(2.0)  # one measured shape: its loss is the whole geomean's


def test_row_bands_follow_decode_to_prefill() -> None:
    assert [by_rows(Score(m, PLAIN, PLAIN, 1.0)) for m in (1, 2, 16, 17, 64, 65, 512, 513)] == [
        "M 1", "M 2-16", "M 2-16", "M 17-64", "M 17-64", "M 65-512", "M 65-512", "M > 512",
    ]  # fmt: skip


def test_format_names_the_grouping_and_says_when_nothing_was_lost() -> None:
    assert "every measured pick is the fastest" in format_losses([Score(8, PLAIN, PLAIN, 1.0)])
    text = format_losses([Score(8, PLAIN, TMA_FLAT, 0.5)], "rows")
    assert "by rows" in text and "M 2-16" in text and "100.0%" in text
    with pytest.raises(ValueError, match="unknown grouping 'stages'"):
        format_losses([], "stages")


def test_tiles_group_by_variant_and_tile_whatever_the_warps_stages_and_split() -> None:
    assert config_tile("persistent/16x64x128/g8/w4/s4/k1") == "persistent/16x64x128"
    assert config_tile(TMA_FLAT) == "tma/128x256x64/f"
    assert config_tile(TMA_COMPOSITE) == "tma/128x256+64x64"
    scores = [
        Score(1, "persistent/16x64x128/g8/w4/s4/k1", "tma/64x64x128/g8/w4/s4/k1/f", 0.8),
        Score(3, "persistent/16x64x128/g8/w4/s2/k1", "tma/64x64x128/g8/w4/s8/k1/f", 0.9),
        Score(8, SPLIT, "splitk/16x64x128/g8/w4/s4/k8", 0.95),  # the split depth: one tile, the same group name twice
    ]
    rows = selection_losses(scores, by_tile)
    assert [(row.group, row.missed) for row in rows] == [
        ("persistent/16x64x128 -> tma/64x64x128/f", 2),
        ("splitk/16x64x128 -> splitk/16x64x128", 1),
    ]
    text = format_losses(scores, "tiles")
    assert "by tiles" in text and "persistent/16x64x128 -> tma/64x64x128/f missed     2" in text
