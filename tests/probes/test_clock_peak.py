"""The clock probe's peak is measured cold once: a guarded re-run after the matrix train reuses it."""

from __future__ import annotations

import numpy as np
import pytest
from theodolite.probes import clock, guard
from theodolite.probes.common import ProbeContext


def fake_card(monkeypatch: pytest.MonkeyPatch, sustained_noise: list[float]) -> list[float]:
    """A card whose peak clock drops 6% once a matrix train has run; the sustained clock's noise per run."""
    peaks: list[float] = []
    state = {"warm": False, "runs": 0}

    def max_clock_sample(ctx: ProbeContext) -> float:
        value = 1.86e9 if state["warm"] else 1.976e9
        peaks.append(value)
        return value

    def sustained(ctx: ProbeContext, duration_s: float):
        noise = sustained_noise[state["runs"]]
        state["runs"] += 1
        state["warm"] = True
        t = np.linspace(0.0, duration_s, 40)
        rng = np.random.default_rng(state["runs"])
        hz = 1.56e9 * (1 + noise * rng.standard_normal(t.size))
        return t, hz, []

    monkeypatch.setattr(clock, "max_clock_sample", max_clock_sample)
    monkeypatch.setattr(clock, "sustained", sustained)
    return peaks


def test_rerun_keeps_the_cold_peak(monkeypatch: pytest.MonkeyPatch) -> None:
    peaks = fake_card(monkeypatch, sustained_noise=[0.08, 0.001, 0.001])
    ctx = ProbeContext(repeats=3, retries=0, sm_count=4, log=lambda _: None)
    result, record = guard.guarded(
        "clock", lambda: clock.run(ctx), {"clock_max_hz": 0.02, "clock_sustained_matrix_hz": 0.02}, log=lambda _: None
    )
    assert record is not None and record.remeasured  # the noisy sustained clock was measured again
    assert record.kept == 1
    assert all(p == 1.976e9 for p in peaks)  # the peak was never sampled on the warmed card
    assert result.metrics["clock_max_hz"].value == pytest.approx(1.976e9)
    assert ctx.clock_max_hz == pytest.approx(1.976e9)


def test_a_noisy_cold_peak_is_measured_again(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_card(monkeypatch, sustained_noise=[0.001, 0.001])
    ctx = ProbeContext(repeats=3, retries=0, sm_count=4, log=lambda _: None)
    noisy = clock.analysis.summarize("clock_max_hz", [1.5e9, 1.9e9, 1.7e9], "Hz", "fake")
    ctx.cold_clock_max = noisy
    result = clock.run(ctx)
    assert result.metrics["clock_max_hz"] is not noisy
    assert result.metrics["clock_max_hz"].value == pytest.approx(1.976e9)
    assert ctx.cold_clock_max is noisy  # only the first (cold) measurement is stored


def test_quick_and_full_runs_train_alike_and_take_the_settled_median(monkeypatch: pytest.MonkeyPatch) -> None:
    """A quick run trains as long as a full one, and the level is the median after the first 30% of the trace: a
    boost at the start and a dip in the last fifth (as a power controller swings) do not move it."""
    durations: list[float] = []

    def sustained(ctx: ProbeContext, duration_s: float):
        durations.append(duration_s)
        t = np.linspace(0.0, 1.0, 100)
        hz = np.where(t < 0.2, 1.75e9, np.where(t > 0.8, 1.45e9, 1.62e9))
        return t, hz, []

    monkeypatch.setattr(clock, "max_clock_sample", lambda ctx: 1.976e9)
    monkeypatch.setattr(clock, "sustained", sustained)
    levels = []
    for quick in (True, False):
        ctx = ProbeContext(repeats=3, retries=0, sm_count=4, quick=quick, log=lambda _: None)
        levels.append(clock.run(ctx).metrics["clock_sustained_matrix_hz"].value)
    assert durations[0] == durations[1] == clock.TRAIN_S
    assert levels == [pytest.approx(1.62e9)] * 2  # the last 30% alone would read the dip's 1.45 GHz
