"""hbm_saturation_sms from a fitted saturating curve: continuous in the data, stable under sweep noise, re-derivable.

The curves are synthetic (the fitted form with the bundled H100/H200 curves' parameters, so the true 90% point is
known) and the bundled profiles' stored curves themselves.
"""

from __future__ import annotations

import numpy as np
import pytest
from theodolite.probes import analysis, hbm
from theodolite.probes.runner import SPREAD_LIMITS

from theodolite.profile.hdf5 import load_profile
from theodolite.profile.resolve import bundled_dir

SMS = np.array([1, 2, 4, 8, 16, 24, 32, 48, 64, 80, 96, 112, 132], dtype=float)
QUICK_SMS = np.array([1, 8, 32, 64, 96, 132], dtype=float)  # the grid quick runs used to sweep
# (plateau B/s, rate of one SM B/s, exponent, sharpness): the fits of the bundled H200 and H100 curves
H200_LIKE = (4.727e12, 94.9e9, 0.967, 3.04)
H100_LIKE = (3.124e12, 92.7e9, 0.984, 2.60)


def curve(params: tuple[float, float, float, float], x: np.ndarray = SMS, shift: float = 1.0) -> np.ndarray:
    """The saturating curve with its knee moved right by ``shift`` (x scaled by 1 / shift)."""
    plateau, rate, exponent, sharpness = params
    return analysis._soft_min(x / shift, plateau, rate, exponent, sharpness)


def true_point(params: tuple[float, float, float, float], shift: float = 1.0) -> float:
    dense = np.linspace(1.0, 132.0, 200_001)
    y = curve(params, dense, shift)
    return float(dense[np.argmax(y >= 0.9 * y[-1])])


@pytest.mark.parametrize("params", [H200_LIKE, H100_LIKE], ids=["h200", "h100"])
def test_fit_recovers_the_90_percent_point_of_a_clean_curve(params):
    fit = analysis.saturation_fit(SMS, curve(params))
    assert fit.point == pytest.approx(true_point(params), rel=2e-3)
    assert fit.residual < 1e-3
    assert fit.plateau == pytest.approx(params[0], rel=0.01)


@pytest.mark.parametrize("params", [H200_LIKE, H100_LIKE], ids=["h200", "h100"])
@pytest.mark.parametrize("shift", [0.98, 0.995, 1.005, 1.02, 1.05])
def test_a_small_knee_shift_moves_the_point_by_a_small_amount(params, shift):
    """The knee moved by (shift - 1): the point follows the true 90% point (which moves a little less, as the value at
    all SMs moves with it), by no more than the shift, never by a grid step (16 SMs = 25%)."""
    base = analysis.saturation_fit(SMS, curve(params)).point
    moved = analysis.saturation_fit(SMS, curve(params, shift=shift)).point
    assert moved / base == pytest.approx(true_point(params, shift) / true_point(params), abs=0.003)
    assert abs(moved / base - 1.0) <= abs(shift - 1.0) + 0.003
    assert (moved - base) * (shift - 1.0) > 0


@pytest.mark.parametrize("params", [H200_LIKE, H100_LIKE], ids=["h200", "h100"])
def test_one_point_off_by_one_percent_moves_the_point_little(params):
    """Any one point 1% off (two noise sigmas of a sweep): the fit moves by at most 1.5%; the old crossing on the
    quick grid moved by up to 2.4-3.7% on the same curves (the fit pools every point)."""
    y = curve(params)
    base = analysis.saturation_fit(SMS, y).point
    moves = []
    for index in range(SMS.size):
        for sign in (-1.0, 1.0):
            nudged = y.copy()
            nudged[index] *= 1.0 + sign * 0.01
            moves.append(abs(analysis.saturation_fit(SMS, nudged).point / base - 1.0))
    quick = np.isin(SMS, QUICK_SMS)
    old_base = analysis.saturation_point(SMS[quick], y[quick], 0.9)
    old_moves = []
    for index in range(int(quick.sum())):
        for sign in (-1.0, 1.0):
            nudged = y[quick].copy()
            nudged[index] *= 1.0 + sign * 0.01
            old_moves.append(abs(analysis.saturation_point(SMS[quick], nudged, 0.9) / old_base - 1.0))
    assert max(moves) < 0.015
    assert max(old_moves) > 1.5 * max(moves)


@pytest.mark.parametrize("params", [H200_LIKE, H100_LIKE], ids=["h200", "h100"])
def test_sweep_noise_keeps_the_value_within_the_bar(params):
    """0.5% noise per point and sweep (what the old quick values' spread implies on the H200) over 60 seeded runs of
    7 sweeps: every run's value within 5% of the noise-free one (the node bar), typically within 1.5%; the old
    derivation (one sweep of the quick grid, interpolated crossing) leaves the bar on the same noise."""
    rng = np.random.default_rng(7)
    clean = analysis.saturation_fit(SMS, curve(params)).point
    new, old = [], []
    for _ in range(60):
        sweeps = curve(params) * (1.0 + 0.005 * rng.standard_normal((hbm.SATURATION_SWEEPS, SMS.size)))
        new.append(hbm.saturation_measurement(hbm.sms_curve(SMS, sweeps)).value / clean - 1.0)
        quick = np.isin(SMS, QUICK_SMS)
        old.append(analysis.saturation_point(SMS[quick], sweeps[0][quick], 0.9) / true_point(params) - 1.0)
    assert max(abs(v) for v in new) < 0.05
    assert float(np.std(new)) < 0.015
    assert max(abs(v) for v in old) > 0.05


def test_the_spread_the_guard_sees_grows_with_the_noise():
    rng = np.random.default_rng(3)
    quiet = curve(H200_LIKE) * (1.0 + 0.003 * rng.standard_normal((7, SMS.size)))
    noisy = curve(H200_LIKE) * (1.0 + 0.03 * rng.standard_normal((7, SMS.size)))
    m_quiet = hbm.saturation_measurement(hbm.sms_curve(SMS, quiet))
    m_noisy = hbm.saturation_measurement(hbm.sms_curve(SMS, noisy))
    assert m_quiet.samples.size == 7 and m_quiet.cv < 0.02
    limit = SPREAD_LIMITS["hbm"]["hbm_saturation_sms"]
    assert m_quiet.cv < limit < m_noisy.cv


def test_the_value_is_the_fit_of_the_stored_median_curve():
    rng = np.random.default_rng(5)
    sweeps = curve(H100_LIKE) * (1.0 + 0.01 * rng.standard_normal((7, SMS.size)))
    stored = hbm.sms_curve(SMS, sweeps)
    assert np.allclose(stored.y, np.median(sweeps, axis=0))
    assert np.all(stored.y_low <= stored.y) and np.all(stored.y <= stored.y_high)
    m = hbm.saturation_measurement(stored)
    assert m.value == pytest.approx(analysis.saturation_fit(SMS, stored.y).point)
    assert m.method_version == "2" and m.settings["sweeps"] == 7


@pytest.mark.parametrize("name", ["nvidia-h100-80gb-hbm3.h5", "nvidia-h200.h5"])
def test_bundled_profiles_hold_the_fitted_value_of_their_curve(name):
    profile = load_profile(bundled_dir() / name)
    curve_ = profile.curves["hbm_read_bandwidth_vs_sms"]
    stored = profile.metrics["hbm_saturation_sms"]
    rederived = hbm.saturation_measurement(curve_)
    assert stored.value == pytest.approx(rederived.value, rel=1e-9)
    assert stored.method_version == "2"
    # the form describes the measured curves: H100 0.0024, H200 0.0068 and 0.012 (its calibrations of 2026-11-29)
    assert rederived.settings["fit_residual"] < 0.02


def test_bad_curves_are_named():
    with pytest.raises(ValueError, match="at least 5 points"):
        analysis.saturation_fit([1, 2, 3], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="positive"):
        analysis.saturation_fit(SMS, np.where(SMS > 60, 0.0, curve(H100_LIKE)))
    with pytest.raises(ValueError, match="fraction"):
        analysis.saturation_fit(SMS, curve(H100_LIKE), fraction=1.5)


def test_few_points_fall_back_to_the_interpolated_crossing():
    few = np.array([1.0, 2.0, 4.0])
    m = hbm.saturation_measurement(hbm.sms_curve(few, curve(H100_LIKE, few)[None, :]))
    assert m.settings["derivation"] == "saturation_point"
    assert 1.0 <= m.value <= 4.0


def test_sweep_points_read_the_same_bytes_in_quick_and_full_runs() -> None:
    """Quick and full runs sweep the same buffer, so every point reads the same bytes (with half the bytes a quick
    90% point read 7-8% higher on two H100s; with only the points above half the SMs capped by a 1 GiB buffer, 4-6%
    lower on four H100s)."""
    sms, quick, full = 132, 1 << 30, 2 << 30
    assert hbm.sweep_buffer_bytes(quick) == hbm.sweep_buffer_bytes(full) == hbm.SWEEP_BYTES
    for count in range(1, sms + 1):
        quick_bytes = hbm.sweep_point_bytes(count, sms, hbm.sweep_buffer_bytes(quick))
        assert quick_bytes == hbm.sweep_point_bytes(count, sms, hbm.sweep_buffer_bytes(full))
    assert hbm.sweep_point_bytes(1, sms, full) == hbm.SWEEP_MIN_BYTES  # a floor long against a launch
    assert hbm.sweep_point_bytes(sms, sms, quick) == quick < hbm.sweep_point_bytes(sms, sms, full) == full
    sizes = [hbm.sweep_point_bytes(c, sms, full) for c in range(1, sms + 1)]
    assert sizes == sorted(sizes)  # more SMs never read fewer bytes
