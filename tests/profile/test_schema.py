from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from theodolite.errors import ProfileError
from theodolite.profile import METRICS, Measurement, Profile
from theodolite.profile.datasheet import DATASHEETS, h100_sxm, mi300x


def test_from_samples_statistics() -> None:
    m = Measurement.from_samples("l2_bandwidth", [10, 11, 12, 13, 100], "B/s", "probe")
    assert m.value == 12
    assert m.mad == 1
    assert m.p10 == pytest.approx(10.4)
    assert m.flagged  # the outlier makes the CV far above 5%
    assert not Measurement.from_samples("l2_bandwidth", [100, 101, 99, 100], "B/s", "probe").flagged


@given(st.lists(st.floats(min_value=1.0, max_value=1e6), min_size=1, max_size=50))
def test_from_samples_median_within_range(samples: list[float]) -> None:
    m = Measurement.from_samples("sm_count", samples, "1", "probe")
    assert min(samples) <= m.value <= max(samples)
    assert m.p10 <= m.value <= m.p90 or math.isclose(m.p10, m.p90)


def test_samples_are_immutable() -> None:
    m = Measurement.from_samples("sm_count", [1, 2, 3], "1", "probe")
    with pytest.raises(ValueError):
        m.samples[0] = 5


@pytest.mark.parametrize("name", sorted(DATASHEETS))
def test_datasheets_validate(name: str) -> None:
    profile = DATASHEETS[name]()
    assert profile.provenance.source == "datasheet"
    for metric, spec in METRICS.items():
        if spec.required:
            assert profile.value(metric) > 0


def _with_metric(profile: Profile, measurement: Measurement) -> Profile:
    return replace(profile, metrics={**profile.metrics, measurement.name: measurement})


@pytest.mark.parametrize(
    ("value", "unit", "message"),
    [
        (-3e12, "B/s", "sane range"),
        (math.nan, "B/s", "not a finite number"),
        (math.inf, "B/s", "not a finite number"),
        (3e12, "GB/s", "unit"),
    ],
)
def test_bad_values_are_refused(value: float, unit: str, message: str) -> None:
    bad = Measurement("hbm_read_bandwidth", value, unit, "probe")
    with pytest.raises(ProfileError, match=message):
        _with_metric(h100_sxm(), bad)


def test_missing_required_metric_is_named() -> None:
    profile = h100_sxm()
    metrics = {k: v for k, v in profile.metrics.items() if k != "sm_count"}
    with pytest.raises(ProfileError, match="sm_count"):
        replace(profile, metrics=metrics)


def test_unknown_metric_and_source_refused() -> None:
    with pytest.raises(ProfileError, match="unknown metric"):
        _with_metric(h100_sxm(), Measurement("flux_capacitance", 1.0, "1", "probe"))
    with pytest.raises(ProfileError, match="source"):
        replace(h100_sxm(), provenance=replace(h100_sxm().provenance, source="guessed"))


def test_value_names_missing_metric_and_unsupported_reason() -> None:
    profile = replace(h100_sxm(), unsupported={"mma_latency_bf16": "no probe on this arch"})
    with pytest.raises(ProfileError, match="no probe on this arch"):
        profile.value("mma_latency_bf16")
    assert profile.get("mma_latency_bf16") is None


def test_fingerprint_is_stable_and_value_sensitive() -> None:
    assert h100_sxm().fingerprint == h100_sxm().fingerprint
    assert h100_sxm().fingerprint != mi300x().fingerprint
    faster = _with_metric(h100_sxm(), Measurement("hbm_read_bandwidth", 3.36e12, "B/s", "datasheet"))
    assert faster.fingerprint != h100_sxm().fingerprint


def test_newer_major_schema_refused() -> None:
    with pytest.raises(ProfileError, match="schema version 2.0"):
        replace(h100_sxm(), schema_version="2.0")


def test_curve_shape_mismatch() -> None:
    from theodolite.profile import Curve

    with pytest.raises(ProfileError, match="x has 3 points"):
        Curve("c", np.ones(3), np.ones(4), "B", "B/s", "probe")
