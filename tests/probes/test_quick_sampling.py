"""Quick calibration's matrix sampling: long enough to average the power controller's clock swings, and the clock
range of the window recorded beside the throughput."""

from __future__ import annotations

import pytest
from theodolite.probes import matrix
from theodolite.probes.analysis import summarize


def test_quick_window_spans_several_clock_periods():
    """The quick window was 5 x 8 ms (40 ms, under one ~100 ms swing of the power-limited clock): the same H200 read
    fp16 766-819 TFLOP/s.  It must cover most of the full run's window and at least four swings."""
    quick = matrix.MATRIX_REPEATS_QUICK * matrix.SAMPLE_S_QUICK
    full = matrix.MATRIX_REPEATS * matrix.SAMPLE_S
    assert quick >= 0.4 and quick >= 0.75 * full
    # five dtypes: the quick window and warm-up together stay a few seconds (node rounds well under 60 s)
    assert 5 * (quick + matrix.WARM_S_QUICK) < 6.0


def test_clock_range_and_per_cycle_rate_recorded():
    m = summarize("mma_throughput_fp16", [800e12, 810e12, 790e12], "FLOP/s", "matrix.onchip_dot")
    out = matrix._with_clock(m, [1.50e9, 1.55e9, 1.45e9], 132)
    assert out.settings["clock_hz_during"] == pytest.approx(1.50e9)
    assert out.settings["clock_hz_min"] == pytest.approx(1.45e9)
    assert out.settings["clock_hz_max"] == pytest.approx(1.55e9)
    assert out.settings["flop_per_cycle_per_sm"] == pytest.approx(800e12 / 1.50e9 / 132)
    assert matrix._with_clock(m, [], 132) is m
