"""Offline evaluation against a (synthetic) results file."""

from __future__ import annotations

import dataclasses
import math

import pytest
from theodolite.kernels.config import Problem
from theodolite.model import rank
from theodolite.model.evaluate import (
    BAR_GEOMEAN,
    BAR_P5,
    FINE_SCHEDULE,
    FIXED_CONFIG,
    ShapeScore,
    Summary,
    bars_loss,
    efficiency_loss,
    fit,
    format_summary,
    main,
    per_suite,
    summarize,
)  # fmt: skip

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
    # the fast path may pick a near-tie instead of the exact argmin (512x14336x4096: Stream-K 128x256 s3 for the
    # flattened persistent 128x256, 0.003% slower in the model), never more than that here
    assert summary.geomean == pytest.approx(1.0, rel=1e-4)
    assert summary.p5 == pytest.approx(1.0, rel=1e-4)
    assert summary.spearman_median > 0.99
    assert summary.unmeasured_picks == 0
    assert summary.peers["fixed"]["geomean"] <= 1.0
    assert summary.vs_torch_geomean == pytest.approx(1.0, rel=1e-4)
    assert summary.absolute["count"] == len(SHAPES)
    assert summary.absolute["median"] == pytest.approx(1.0) and summary.absolute["p90"] == pytest.approx(1.0)


def test_absolute_accuracy_reads_predicted_over_measured() -> None:
    """Every config measured twice as slow as predicted: the ranks (and so efficiency) stay perfect, the absolute
    line says 0.5, and says so in the text."""
    slow = _results()
    for shape in slow.shapes:
        shape.configs = {key: ms * 2.0 for key, ms in shape.configs.items()}
    summary = summarize(slow, H100)
    assert summary.geomean == pytest.approx(1.0, rel=1e-4)
    assert summary.absolute["median"] == pytest.approx(0.5)
    assert summary.absolute["p10"] == pytest.approx(0.5) and summary.absolute["p90"] == pytest.approx(0.5)
    assert "predicted / measured time of the picks, median 0.500" in format_summary(summary)


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


def _summary(efficiencies: dict[str, list[float]]) -> Summary:
    """A Summary whose shapes carry only names (llm vs devNNN) and efficiencies: what the fit losses read."""
    shapes = [
        ShapeScore(f"{suite}{i:03d}", 1, 1, 1, "a", "a", 1.0, 1.0, value, math.nan, None)
        for suite, values in efficiencies.items()
        for i, value in enumerate(values)
    ]
    return Summary(shapes, math.nan, math.nan, math.nan, math.nan, 0, {}, math.nan)


def test_bars_loss_is_per_suite_with_a_hinge_under_the_bars() -> None:
    perfect = _summary({"llama": [1.0] * 40, "dev": [1.0] * 40})
    assert bars_loss(perfect) == pytest.approx(0.0)
    # random-dev's p5 at 0.8 (three of 40 shapes): its own terms, and the hinge on its 0.11 shortfall under 0.91
    low = _summary({"llama": [1.0] * 40, "dev": [0.8] * 3 + [1.0] * 37})
    stats = per_suite(low)["random-dev"]
    assert stats["p5"] == pytest.approx(0.8)
    unhinged = -(math.log(stats["geomean"]) + 0.5 * math.log(0.8))
    assert bars_loss(low, hinge=0.0) == pytest.approx(unhinged)
    assert stats["geomean"] > BAR_GEOMEAN  # 0.8 ** (3 / 40): over its target, no hinge on the geomean
    assert bars_loss(low, hinge=10.0) == pytest.approx(unhinged + 10.0 * (BAR_P5 - 0.8))
    # the merged objective sees one suite of 80 shapes: the same shapes score differently per suite
    assert efficiency_loss(dataclasses.replace(low, geomean=stats["geomean"] ** 0.5, p5=0.9)) != bars_loss(low, 0.0)


def test_fit_never_raises_its_loss_and_keeps_what_it_returns() -> None:
    """From a perturbed start, the coarse-to-fine search ends at a loss no higher than the start's (on results the
    model generated at its defaults), and leaves the process-wide override at the value it returns."""
    from theodolite.model.hardware import current_parameters, reset_parameters, set_parameters

    results = _results()
    reset_parameters()
    try:
        set_parameters(model_latency_hiding=0.1)
        start = bars_loss(summarize(results, H100, exact=True))
        values = fit(results, H100, ["model_latency_hiding"], loss=bars_loss, schedule=FINE_SCHEDULE)
        assert current_parameters(H100)["model_latency_hiding"] == values["model_latency_hiding"]
        assert bars_loss(summarize(results, H100, exact=True)) <= start
    finally:
        reset_parameters()


def test_breakdown_by_suite_layout_and_m() -> None:
    from theodolite.model.evaluate import SKINNY_M, breakdown, suite_of

    assert [suite_of(n) for n in ("dev007", "wide128", "llama3-8b.qkv", "device1", "wideband")] == [
        "random-dev",
        "wide",
        "llm",
        "llm",
        "llm",
    ]
    rows = [
        ShapeScore("wide000", 2, 64, 64, "a", "a", 1.0, 1.0, 0.5, math.nan, None, layout="nn"),
        ShapeScore("wide001", 512, 64, 64, "a", "a", 1.0, 1.0, 1.0, math.nan, None, layout="nt"),
        ShapeScore("wide002", SKINNY_M, 64, 64, "a", "a", 1.0, 1.0, 0.8, math.nan, None, layout="nt"),
    ]
    summary = Summary(rows, math.nan, math.nan, math.nan, math.nan, 0, {}, math.nan)
    groups = breakdown(summary)
    assert groups["layout nn"]["count"] == 1 and groups["layout nt"]["count"] == 2
    assert groups[f"M <= {SKINNY_M}"]["count"] == 2 and groups[f"M <= {SKINNY_M}"]["min"] == pytest.approx(0.5)
    assert groups[f"M > {SKINNY_M}"]["geomean"] == pytest.approx(1.0)
    assert groups["layout nt"]["geomean"] == pytest.approx(0.8**0.5)
    assert list(per_suite(summary)) == ["wide"]


def test_cli_losses_name_the_kind_a_slow_pick_loses_to(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    from theodolite.model.selection_loss import config_kind

    from theodolite.profile import save_profile

    pick = rank(Problem(*SHAPES[0]), H100)[0].key
    save_profile(H100, tmp_path / "h100.h5")
    path = save_results(_results({pick: 2.0}), tmp_path / "bench.json")
    assert main([str(path), "--profile", str(tmp_path / "h100.h5"), "--no-peers", "--losses", "kind"]) == 0
    out = capsys.readouterr().out
    assert "where selection loses, by kind" in out
    assert f"{config_kind(pick)} -> " in out.split("where selection loses")[1]
