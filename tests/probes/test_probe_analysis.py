"""The pure probe analysis on synthetic curves whose answers are known (and noisy variants)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from theodolite.probes import analysis


def bandwidth_curve(sizes: np.ndarray, capacity: float, high: float = 8e12, low: float = 3e12, sharp: float = 12.0):
    """Sigmoid step in log size: plateau ``high`` below ``capacity``, ``low`` beyond it."""
    t = 1.0 / (1.0 + np.exp(-sharp * (np.log(sizes) - np.log(capacity))))
    return high + (low - high) * t


def test_reject_outliers_drops_the_spike_only():
    kept, rejected = analysis.reject_outliers([10.0, 10.1, 9.9, 10.05, 9.95, 30.0])
    assert rejected.tolist() == [False] * 5 + [True]
    assert kept.size == 5


def test_reject_outliers_keeps_small_or_flat_sets():
    kept, rejected = analysis.reject_outliers([1.0, 100.0, 1.0])
    assert kept.size == 3 and not rejected.any()
    kept, rejected = analysis.reject_outliers([2.0] * 6)
    assert kept.size == 6


def test_summarize_flags_noisy_and_notes_rejections():
    quiet = analysis.summarize("l2_bandwidth", [1e12, 1.01e12, 0.99e12, 1e12, 1e12, 5e12], "B/s", "l2")
    assert quiet.value == pytest.approx(1e12)
    assert not quiet.flagged
    assert "outlier" in quiet.note
    assert quiet.samples.size == 5
    noisy = analysis.summarize("l2_bandwidth", [1e12, 1.3e12, 0.7e12, 1.2e12, 0.8e12], "B/s", "l2")
    assert noisy.flagged


def test_measure_with_retries_recovers_then_flags():
    batches = iter([[1.0, 2.0, 3.0, 1.5, 2.5], [1.0, 1.0, 1.01, 0.99, 1.0]])
    values = iter([v for batch in batches for v in batch])
    good = analysis.measure_with_retries(lambda: next(values), "sm_count", "1", "t", repeats=5, retries=2)
    assert not good.flagged and good.value == pytest.approx(1.0)
    assert "attempt 2/3" in good.note

    rng = np.random.default_rng(1)
    calls = []

    def noisy() -> float:
        calls.append(1)
        return float(rng.uniform(0.5, 1.5))

    bad = analysis.measure_with_retries(noisy, "sm_count", "1", "t", repeats=5, retries=2)
    assert bad.flagged
    assert len(calls) == 15


@pytest.mark.parametrize("capacity", [40e6, 50e6, 60e6])
def test_knee_of_clean_bandwidth_curve(capacity):
    sizes = np.geomspace(1e6, 1e9, 40)
    knee = analysis.knee(sizes, bandwidth_curve(sizes, capacity))
    assert knee == pytest.approx(capacity, rel=0.03)


def test_knee_of_rising_latency_curve():
    sizes = np.geomspace(1e5, 1e9, 50)
    latency = 260 + (600 - 260) / (1 + np.exp(-10 * (np.log(sizes) - np.log(45e6))))
    assert analysis.knee(sizes, latency, falling=False) == pytest.approx(45e6, rel=0.03)


def test_knee_rejects_flat_curve():
    sizes = np.geomspace(1e6, 1e9, 20)
    with pytest.raises(ValueError):
        analysis.knee(sizes, np.full(sizes.shape, 3e12))


@settings(max_examples=40, deadline=None)
@given(
    capacity=st.floats(min_value=5e6, max_value=2e8),
    noise=st.floats(min_value=0.0, max_value=0.03),
    seed=st.integers(min_value=0, max_value=10_000),
)
def test_knee_noisy_within_tolerance(capacity, noise, seed):
    rng = np.random.default_rng(seed)
    sizes = np.geomspace(5e5, 2e9, 48)
    curve = bandwidth_curve(sizes, capacity) * (1 + noise * rng.standard_normal(sizes.size))
    assert analysis.knee(sizes, curve) == pytest.approx(capacity, rel=0.12)


def staircase_times(programs: np.ndarray, width: int, base=5e-6, step=40e-6) -> np.ndarray:
    return base + step * np.ceil(programs / width)


def test_staircase_exact():
    programs = np.arange(8, 400, 8)
    fit = analysis.fit_staircase(programs, staircase_times(programs, 132), min_width=16, max_width=300)
    assert fit.width in range(128, 137)
    programs = np.arange(1, 400)
    fit = analysis.fit_staircase(programs, staircase_times(programs, 132), min_width=16, max_width=300)
    assert fit.width == 132
    assert fit.step == pytest.approx(40e-6)


@settings(max_examples=25, deadline=None)
@given(
    width=st.integers(min_value=40, max_value=200),
    noise=st.floats(min_value=0.0, max_value=0.02),
    seed=st.integers(min_value=0, max_value=1000),
)
def test_staircase_noisy(width, noise, seed):
    rng = np.random.default_rng(seed)
    programs = np.arange(1, int(3.2 * width))
    times = staircase_times(programs, width) * (1 + noise * rng.standard_normal(programs.size))
    fit = analysis.fit_staircase(programs, times, min_width=16, max_width=2 * width + 10)
    assert fit.width == width


def test_latency_classes_two_classes():
    rng = np.random.default_rng(0)
    near = rng.normal(260, 8, 700)
    far = rng.normal(480, 15, 300)
    classes = analysis.latency_classes(np.concatenate([near, far, [5000.0]]))
    assert classes.separated
    assert classes.near == pytest.approx(260, abs=5)
    assert classes.far == pytest.approx(480, abs=8)
    assert classes.far_share == pytest.approx(0.3, abs=0.03)


def test_latency_classes_one_class():
    rng = np.random.default_rng(3)
    classes = analysis.latency_classes(rng.normal(300, 10, 1000))
    assert not classes.separated
    assert classes.near == classes.far == pytest.approx(300, abs=2)


def test_saturation_point():
    sms = np.arange(1, 133, dtype=float)
    bandwidth = np.minimum(sms * 40e9, 3.0e12)
    assert analysis.saturation_point(sms, bandwidth, 0.9) == pytest.approx(67.5, abs=0.5)


@settings(max_examples=40, deadline=None)
@given(st.floats(20e9, 200e9), st.floats(1e12, 5e12), st.floats(0.0, 0.02), st.integers(0, 10_000))
def test_unshared_rates_are_one_units_rate(rate: float, cap: float, noise: float, seed: int) -> None:
    """Per-unit rates of a rate-against-units curve (linear until it saturates) where units do not share."""
    sms = np.array([1, 2, 4, 8, 16, 24, 32, 48, 64, 80, 96, 112, 132], dtype=float)
    jitter = 1.0 + noise * np.random.default_rng(seed).standard_normal(sms.size)
    bandwidth = np.minimum(sms * rate, cap) * jitter
    rates = analysis.unshared_rates(sms[::-1], bandwidth[::-1], 0.5)  # any order
    assert 1 <= rates.size <= max(int(np.sum(sms * rate < 0.6 * cap)), 1)
    assert float(np.median(rates)) == pytest.approx(rate, rel=3 * noise + 1e-9)


def test_unshared_rates_edges() -> None:
    # the first point is kept even when it is not below half (one SM already saturates)
    assert analysis.unshared_rates([1.0, 2.0], [10.0, 10.0]).tolist() == [10.0]
    with pytest.raises(ValueError):
        analysis.unshared_rates([], [])
    with pytest.raises(ValueError):
        analysis.unshared_rates([0.0, 1.0], [1.0, 2.0])


def test_settled_value_and_ramp():
    times = np.linspace(0, 2, 201)
    clock = np.where(times < 0.5, 1.98e9, 1.5e9)
    level, ramp = analysis.settled_value(times, clock)
    assert level == pytest.approx(1.5e9)
    assert ramp == pytest.approx(0.5, abs=0.011)


def test_rate_from_clock():
    assert analysis.rate_from_clock(1.98e6, 1e6) == pytest.approx(1.98e9)
    with pytest.raises(ValueError):
        analysis.rate_from_clock(1.0, 0.0)
    assert math.isfinite(analysis.rate_from_clock(1.0, 1.0))
