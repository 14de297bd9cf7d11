"""Node and fleet verdict on synthetic cards: a 15% shift among identical cards is named, noise is not."""

from __future__ import annotations

import math
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from theodolite.reports.check import EXACT
from theodolite.reports.fleet_check import MIN_PEERS, fleet_check, labels, peer_judged, render_fleet_html

from theodolite.cli import main
from theodolite.profile import Profile, load_profile, save_profile
from theodolite.profile.resolve import bundled_dir

OUTLIER_CELL = re.compile(r"<td class='num[^']*\boutlier\b")
REFERENCE = bundled_dir() / "nvidia-h100-80gb-hbm3.h5"


@pytest.fixture(scope="module")
def reference() -> Profile:
    return load_profile(REFERENCE)


def card(base: Profile, *, noise: float = 0.0, seed: int = 0, shift: dict[str, float] | None = None, host="n"):
    """``base`` with every measured (non-count) metric scaled by 1 + U(-noise, noise), and ``shift`` on top."""
    rng = np.random.default_rng(seed)
    metrics = {}
    for name, m in base.metrics.items():
        factor = 1.0 if name in EXACT or name.startswith("model_") else 1.0 + rng.uniform(-noise, noise)
        factor *= 1.0 + (shift or {}).get(name, 0.0)
        metrics[name] = replace(m, value=m.value * factor, samples=m.samples * factor)
    provenance = replace(base.provenance, host=host)
    return replace(base, metrics=metrics, provenance=provenance, origin=f"{host}/gpu{seed}.h5")


@pytest.mark.parametrize("metric", ["hbm_read_bandwidth", "hbm_read_bandwidth_one_sm", "l2_latency_far"])
def test_one_metric_shifted_15_percent_among_four_is_the_outlier(reference: Profile, metric: str) -> None:
    cards = [card(reference, noise=0.02, seed=i) for i in range(3)]
    cards.insert(2, card(reference, noise=0.02, seed=7, shift={metric: 0.15}))
    result = fleet_check(cards, reference)
    outliers = {(c.label, name) for c in result.cards for name in c.outliers}
    assert outliers == {(result.cards[2].label, metric)}
    assert not result.passed and not result.cards[2].passed
    assert all(c.passed for i, c in enumerate(result.cards) if i != 2)
    assert [c.failed for i, c in enumerate(result.cards) if i != 2] == [[]] * 3
    cell = result.cards[2].peers[metric]
    assert cell.status == "outlier" and cell.ratio == pytest.approx(1.15, abs=0.04)


def test_outlier_within_the_reference_tolerance_is_still_named(reference: Profile) -> None:
    """8% slower HBM reads than three siblings: inside the reference's +-10%, outside the peers' +-5%."""
    cards = [card(reference, noise=0.01, seed=i) for i in range(3)]
    cards.append(card(reference, noise=0.01, seed=9, shift={"hbm_read_bandwidth": -0.08}))
    result = fleet_check(cards, reference)
    assert [c.failed for c in result.cards] == [[]] * 4
    assert [c.outliers for c in result.cards] == [[], [], [], ["hbm_read_bandwidth"]]
    assert not result.passed


@pytest.mark.parametrize("seed", range(20))
def test_identical_cards_with_two_percent_noise_raise_nothing(reference: Profile, seed: int) -> None:
    cards = [card(reference, noise=0.02, seed=100 * seed + i) for i in range(4)]
    result = fleet_check(cards, reference)
    assert [c.outliers for c in result.cards] == [[]] * 4
    assert result.passed


def test_eight_cards_with_noise_one_slow_card(reference: Profile) -> None:
    cards = [card(reference, noise=0.02, seed=i) for i in range(8)]
    cards[5] = card(reference, noise=0.02, seed=5, shift={"mma_throughput_bf16": -0.15})
    result = fleet_check(cards, reference)
    assert [c.outliers for c in result.cards] == [[]] * 5 + [["mma_throughput_bf16"]] + [[]] * 2


def test_two_cards_report_their_difference_without_naming_an_outlier(reference: Profile) -> None:
    a, b = card(reference, seed=1), card(reference, seed=2, shift={"hbm_read_bandwidth": 0.15})
    result = fleet_check([a, b], reference)
    assert MIN_PEERS == 3
    assert [c.outliers for c in result.cards] == [[], []]
    assert [c.differs for c in result.cards] == [["hbm_read_bandwidth"], ["hbm_read_bandwidth"]]
    # a pair cannot say which card is off: the good card passes; the reference check still judges each
    assert result.cards[0].passed and result.cards[1].failed == ["hbm_read_bandwidth"]


def test_a_card_failing_the_reference_fails_the_fleet(reference: Profile) -> None:
    cards = [card(reference, seed=i) for i in range(3)]
    cards[1] = card(reference, seed=1, shift={"hbm_copy_bandwidth": -0.3})
    result = fleet_check(cards, reference)
    assert result.cards[1].failed == ["hbm_copy_bandwidth"]
    assert not result.passed and result.cards[0].passed and result.cards[2].passed


def test_mixed_node_compares_like_with_like(reference: Profile) -> None:
    """Two H200s beside three H100s: no H100 is an outlier because of the H200s' bandwidth, and vice versa."""
    h200 = load_profile(bundled_dir() / "nvidia-h200.h5")
    cards = [card(reference, noise=0.01, seed=i) for i in range(3)] + [card(h200, noise=0.01, seed=i) for i in (3, 4)]
    result = fleet_check(cards, None)
    assert [c.outliers for c in result.cards] == [[]] * 5
    assert [c.group_size for c in result.cards] == [3, 3, 3, 2, 2]


def test_a_different_driver_count_among_peers_is_an_outlier(reference: Profile) -> None:
    cards = [card(reference, seed=i) for i in range(4)]
    sm = cards[3].metrics["sm_count"]
    cards[3] = replace(cards[3], metrics={**cards[3].metrics, "sm_count": replace(sm, value=sm.value - 2)})
    result = fleet_check(cards, None)
    assert "sm_count" in result.cards[3].outliers


def test_noisy_measurement_widens_its_own_limit(reference: Profile) -> None:
    cards = [card(reference, seed=i) for i in range(4)]
    m = cards[0].metrics["hbm_read_bandwidth_one_sm"]
    cards[0] = replace(
        cards[0],
        metrics={**cards[0].metrics, "hbm_read_bandwidth_one_sm": replace(m, value=m.value * 1.15, cv=0.10)},
    )
    cell = fleet_check(cards, None).cards[0].peers["hbm_read_bandwidth_one_sm"]
    assert cell.limit == pytest.approx(0.20) and cell.status == "ok"


def test_peer_tolerance_and_judged_metrics(reference: Profile) -> None:
    from theodolite.reports.check import Tolerances

    cards = [card(reference, seed=i) for i in range(3)]
    cards[0] = card(reference, seed=0, shift={"hbm_read_bandwidth": 0.04})
    assert fleet_check(cards, None).cards[0].outliers == []
    assert fleet_check(cards, None, peer_tolerance=0.03).cards[0].outliers == ["hbm_read_bandwidth"]
    none = Tolerances({}, {})
    assert not peer_judged("launch_overhead", none) and not peer_judged("model_issue_rate", none)
    assert peer_judged("hbm_read_bandwidth", none) and peer_judged("sm_count", none)
    with pytest.raises(ValueError):
        fleet_check(cards, None, peer_tolerance=-0.1)


def test_labels_are_the_shortest_unique_tails() -> None:
    assert labels(["node/a.h5", "node/b.h5"]) == ["a.h5", "b.h5"]
    assert labels(["x/n1/h100.h5", "x/n2/h100.h5"]) == ["n1/h100.h5", "n2/h100.h5"]


def _write_node(folder: Path, reference: Profile, shift_card: int | None = None, n: int = 4) -> list[Path]:
    paths = []
    for i in range(n):
        shift = {"hbm_read_bandwidth": 0.15} if i == shift_card else None
        path = folder / f"gpu{i}.h5"
        save_profile(card(reference, noise=0.01, seed=i, shift=shift), path)
        paths.append(path)
    return paths


def test_cli_node_check_exit_codes_and_page(reference: Profile, tmp_path: Path, capsys) -> None:
    good = _write_node(tmp_path / "good", reference)
    assert main(["check", *map(str, good), "--against", str(REFERENCE)]) == 0
    out = capsys.readouterr().out
    assert "fleet check: 4 card(s)" in out and "PASS" in out
    bad = _write_node(tmp_path / "bad", reference, shift_card=1)
    page = tmp_path / "node.html"
    assert main(["check", *map(str, bad), "--against", str(REFERENCE), "--html", str(page)]) == 1
    out = capsys.readouterr().out
    assert "outlier: hbm_read_bandwidth" in out and "FAIL: gpu1.h5" in out.replace("\n", " ")
    text = page.read_text()
    assert len(OUTLIER_CELL.findall(text)) == 1 and "outlier among its peers" in text
    # peers only (no reference), still one outlier
    assert main(["check", *map(str, bad)]) == 1


def test_cli_single_profile_unchanged(tmp_path: Path, capsys) -> None:
    assert main(["check", str(REFERENCE), "--against", str(REFERENCE)]) == 0
    out = capsys.readouterr().out
    assert "check NVIDIA H100 80GB HBM3" in out and "fleet check" not in out  # (a checkout path may say fleet)
    assert main(["check", str(REFERENCE)]) == 2
    assert "needs --against" in capsys.readouterr().err
    assert main(["check", str(REFERENCE), str(REFERENCE), "--peer-tolerance", "5"]) == 2


def _profile_report_tests():  # noqa: ANN202
    """tests/reports/test_profile_report.py as a module (tests/ is not a package: load it by path)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "profile_report_tests", Path(__file__).with_name("test_profile_report.py")
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_fleet_page_renders_in_chromium(reference: Profile, tmp_path: Path) -> None:
    from theodolite.reports.html import write_page

    check_in_chromium = _profile_report_tests().check_in_chromium  # the same headless-Chromium load and screenshot

    cards = [card(reference, noise=0.01, seed=i, host=f"node{i // 2}") for i in range(4)]
    cards[3] = card(reference, noise=0.01, seed=3, host="node1", shift={"l2_bandwidth": -0.15})
    cards[0] = card(reference, noise=0.01, seed=0, host="node0", shift={"hbm_copy_bandwidth": -0.3})
    result = fleet_check(cards, reference)
    page = write_page(render_fleet_html(result), tmp_path / "fleet.html")
    text = page.read_text()
    assert check_in_chromium(page, tmp_path) == []  # loads; no images on this page
    assert "Cards &times; metrics" in text and "<th><i>reference</i></th>" in text
    assert text.count("<tr><td class='card'") == len(result.metrics()) > 40  # one row per metric, a column per card
    assert [c.outliers for c in result.cards] == [["hbm_copy_bandwidth"], [], [], ["l2_bandwidth"]]
    assert len(OUTLIER_CELL.findall(text)) == 2 and text.count("class='num fail") == 2
    assert all(f"<th>{c.label}</th>" in text for c in result.cards)
    assert not math.isnan(result.cards[3].peers["l2_bandwidth"].ratio)
