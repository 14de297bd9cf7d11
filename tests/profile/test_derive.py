"""Metrics derived later from a profile's stored curves (``python -m theodolite.probes.derive``)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from theodolite.probes.derive import derive, main

from theodolite.profile import Curve, Profile, load_profile, save_profile
from theodolite.profile.datasheet import h100_sxm

SMS = np.array([1, 2, 4, 8, 16, 32, 64, 96, 132], dtype=float)


def _with_curve(profile: Profile) -> Profile:
    curve = Curve(
        name="hbm_read_bandwidth_vs_sms", x=SMS, y=np.minimum(SMS * 90e9, 3.0e12), x_unit="1", y_unit="B/s",
        method="hbm.read_cg_programs",
    )  # fmt: skip
    return dataclasses.replace(profile, curves={**profile.curves, curve.name: curve})


def test_derive_adds_one_sms_read_rate_from_the_stored_curve(tmp_path: Path) -> None:
    path = tmp_path / "card.h5"
    save_profile(_with_curve(h100_sxm()), str(path))
    assert main([str(path)]) == 0
    loaded = load_profile(str(path))
    metric = loaded.metrics["hbm_read_bandwidth_one_sm"]
    # the points below half of 3.0 TB/s: 1 to 16 SMs, each at 90 GB/s
    assert metric.value == pytest.approx(90e9) and len(metric.samples) == 5 and metric.unit == "B/s"
    assert "derived later" in metric.note and metric.method == "hbm.read_cg_programs"
    original = _with_curve(h100_sxm())
    assert set(loaded.metrics) == set(original.metrics) | {"hbm_read_bandwidth_one_sm"}
    assert all(loaded.metrics[name].value == original.metrics[name].value for name in original.metrics)
    # a second run changes nothing
    before = path.read_bytes()
    assert main([str(path)]) == 0
    assert path.read_bytes() == before


def test_derive_leaves_profiles_without_the_curve_or_with_the_metric() -> None:
    plain = h100_sxm()
    updated, added = derive(plain)
    assert added == [] and updated.metrics.keys() == plain.metrics.keys()
    once, _ = derive(_with_curve(plain))
    twice, added = derive(once)
    assert added == [] and twice.metrics["hbm_read_bandwidth_one_sm"] == once.metrics["hbm_read_bandwidth_one_sm"]


def test_bundled_measured_profiles_carry_it() -> None:
    root = Path(__file__).resolve().parents[2] / "profiles"
    for name in ("nvidia-h100-80gb-hbm3.h5", "nvidia-h200.h5"):
        value = load_profile(str(root / name)).value("hbm_read_bandwidth_one_sm")
        assert 80e9 < value < 100e9, (name, value)
