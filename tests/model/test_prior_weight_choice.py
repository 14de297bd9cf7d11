"""The calibration fit's prior weight is chosen by held-out picks, ties to the largest weight (the simpler model)."""

from __future__ import annotations

from typing import Any

import pytest
from theodolite.model import calibration_cv
from theodolite.model.calibration_fit import LEVEL, Timing

ROWS = [Timing(m, 64, 64, "nn", key, 1e-6) for m in range(1, 10) for key in ("a", "b")]


class FakeFit:
    def __init__(self, weight: float) -> None:
        self.values = {"w": weight}


def patch(monkeypatch: pytest.MonkeyPatch, level: dict[float, float], regret: dict[float, float]) -> None:
    """Each weight's held-out level loss and regret per shape, whatever the fold."""

    def fake_fit(*args: Any, objective: Any, **kwargs: Any) -> FakeFit:
        return FakeFit(objective.prior_weight)

    def fake_level(profile: Any, test: list[Timing], values: dict[str, float], objective: Any) -> float:
        return level[values["w"]]

    def fake_regret(profile: Any, test: list[Timing], values: dict[str, float]) -> float:
        return regret[values["w"]] * len({t.shape for t in test})

    monkeypatch.setattr(calibration_cv, "fit", fake_fit)
    monkeypatch.setattr(calibration_cv, "heldout_loss", fake_level)
    monkeypatch.setattr(calibration_cv, "heldout_regret", fake_regret)


def choose(criterion: str) -> calibration_cv.Choice:
    return calibration_cv.choose_prior_weight(
        None,  # type: ignore[arg-type]
        ROWS,
        ["w"],
        {},
        LEVEL,
        weights=(0.0, 8.0, 512.0),
        criterion=criterion,
    )


def test_selection_beats_residuals(monkeypatch: pytest.MonkeyPatch) -> None:
    # the defaults (512) fit the levels best but pick worse held-out: the picks decide
    patch(monkeypatch, level={0.0: 0.12, 8.0: 0.11, 512.0: 0.10}, regret={0.0: 0.03, 8.0: 0.05, 512.0: 0.06})
    chosen = choose("selection")
    assert chosen.weight == 0.0
    assert chosen.losses == pytest.approx({0.0: 0.03, 8.0: 0.05, 512.0: 0.06})
    assert choose("level").weight == 512.0


def test_tied_picks_go_to_the_largest_weight(monkeypatch: pytest.MonkeyPatch) -> None:
    # 0 and 8 pick alike (within the tie): 8, the nearer to the priors, whatever the levels; 512 picks worse
    patch(monkeypatch, level={0.0: 0.10, 8.0: 0.11, 512.0: 0.01}, regret={0.0: 0.0300, 8.0: 0.0305, 512.0: 0.2})
    assert choose("selection").weight == 8.0
    # the H200's read-flushed timings: the free fit within the tie and best on levels, 8-512 better on picks: 512
    patch(monkeypatch, level={0.0: 0.01, 8.0: 0.11, 512.0: 0.12}, regret={0.0: 0.0450, 8.0: 0.0442, 512.0: 0.0442})
    assert choose("selection").weight == 512.0


def test_unknown_criterion_is_refused() -> None:
    with pytest.raises(ValueError, match="criterion"):
        choose("median")


def test_cross_validation_redoes_the_prepared_solve_on_each_training_fold(monkeypatch: pytest.MonkeyPatch) -> None:
    """``prepare`` (the composite overhead solved alone) sees only each fold's training shapes, and the fold's fit
    and predictions start from what it returns."""
    seen: list[set[tuple[int, int, int, str, str]]] = []
    bases: list[float] = []

    def prepare(train: Any, base: dict[str, float]) -> dict[str, float]:
        seen.append({t.shape for t in train})
        return {**base, "c": float(len(seen))}

    def fake_fit(profile: Any, train: Any, names: Any, base: dict[str, float], **kwargs: Any) -> FakeFit:
        bases.append(base["c"])
        return FakeFit(0.0)

    class FakePredictor:
        def __init__(self, profile: Any, rows: list[Timing]) -> None:
            self.rows = rows

        def __call__(self, values: dict[str, float]) -> list[float]:
            return [t.seconds for t in self.rows]

    monkeypatch.setattr(calibration_cv, "fit", fake_fit)
    monkeypatch.setattr(calibration_cv, "Predictor", FakePredictor)
    score = calibration_cv.cross_validate(
        None,  # type: ignore[arg-type]
        ROWS,
        ["w"],
        {"c": 0.0},
        LEVEL,
        folds=3,
        prepare=prepare,
    )
    folds = calibration_cv.shape_folds(ROWS, 3)
    assert len(seen) == 3 and all(not (s & held) for s, held in zip(seen, folds, strict=True))
    assert all(len(s) + len(held) == 9 for s, held in zip(seen, folds, strict=True))
    assert bases == [1.0, 2.0, 3.0]  # each fold's fit starts from its own prepared base
    assert score["geomean"] == pytest.approx(1.0)
