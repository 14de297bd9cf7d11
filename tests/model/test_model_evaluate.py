"""Offline evaluation against a (synthetic) results file."""

from __future__ import annotations

import math

import pytest
from theodolite.kernels.config import Problem
from theodolite.model import rank
from theodolite.model.evaluate import FIXED_CONFIG, format_summary, main, summarize

from theodolite.profile.datasheet import h100_sxm
from theodolite.results import Results, ShapeResult, save_results

H100 = h100_sxm()
SHAPES = [(4096, 4096, 4096), (16, 4096, 4096), (512, 14336, 4096), (1000, 1000, 1000), (64, 64, 65536)]


def _results(noise: dict[str, float] | None = None) -> Results:
    shapes = []
    for m, n, k in SHAPES:
        predictions = rank(Problem(m, n, k), H100)
        configs = {p.key: p.time_s * 1e3 * (noise or {}).get(p.key, 1.0) for p in predictions}
        shapes.append(ShapeResult(f"s{m}x{n}x{k}", m, n, k, configs=configs, torch_ms=min(configs.values())))
    return Results(device="NVIDIA H100 80GB HBM3", shapes=shapes)


def test_a_perfect_model_scores_one() -> None:
    summary = summarize(_results(), H100)
    assert summary.geomean == pytest.approx(1.0)
    assert summary.p5 == pytest.approx(1.0)
    assert summary.spearman_median > 0.99
    assert summary.unmeasured_picks == 0
    assert summary.peers["fixed"]["geomean"] <= 1.0
    assert summary.vs_torch_geomean == pytest.approx(1.0)


def test_a_slow_pick_lowers_efficiency() -> None:
    pick = rank(Problem(*SHAPES[0]), H100)[0].key
    summary = summarize(_results({pick: 2.0}), H100)
    worst = min(summary.shapes, key=lambda s: s.efficiency)
    assert SHAPES[0][0] == worst.M and worst.pick == pick
    assert worst.efficiency < 1.0
    assert summary.minimum == pytest.approx(worst.efficiency)
    text = format_summary(summary)
    assert "worst" in text and pick in text


def test_unmeasured_pick_is_counted() -> None:
    results = _results()
    pick = rank(Problem(*SHAPES[1]), H100)[0].key
    results.shapes[1].configs[pick] = None
    summary = summarize(results, H100)
    assert summary.unmeasured_picks == 1
    assert math.isnan(next(s for s in summary.shapes if SHAPES[1][0] == s.M).efficiency)


def test_cli(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    from theodolite.profile import save_profile

    save_profile(H100, tmp_path / "h100.h5")
    path = save_results(_results(), tmp_path / "bench.json")
    assert main([str(path), "--profile", str(tmp_path / "h100.h5"), "--no-peers"]) == 0
    out = capsys.readouterr().out
    assert "selection efficiency geomean 1.0000" in out
    assert "peer fixed" in out and FIXED_CONFIG
