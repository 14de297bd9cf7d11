from __future__ import annotations

import numpy as np
import pytest

from theodolite.profile import Curve, KernelBuild, Measurement, Profile
from theodolite.profile.datasheet import h100_sxm


@pytest.fixture
def measured_profile() -> Profile:
    """A datasheet H100 turned into a 'measured' one with samples, a curve and compiler facts."""
    base = h100_sxm()
    rng = np.random.default_rng(7)
    metrics = dict(base.metrics)
    metrics["hbm_read_bandwidth"] = Measurement.from_samples(
        "hbm_read_bandwidth",
        3.0e12 * (1 + 0.01 * rng.standard_normal(7)),
        "B/s",
        "hbm_bandwidth",
        settings={"bytes": 1 << 31, "repeats": 7},
    )
    sizes = np.geomspace(1 << 20, 1 << 30, 16)
    curve = Curve(
        name="l2_working_set_bandwidth",
        x=sizes,
        y=np.where(sizes < 45e6, 9e12, 3e12),
        x_unit="B",
        y_unit="B/s",
        method="l2_bandwidth",
        x_label="working set",
        y_label="read bandwidth",
        attrs={"knee": 45e6},
    )
    builds = (
        KernelBuild("persistent", "128x256x64-g8-w8-s3", "bf16", "sm_90", 168, 0, 147456, 3),
        KernelBuild("persistent", "256x256x64-g8-w8-s3", "bf16", "sm_90", 255, 120, 196608, 3),
    )
    from dataclasses import replace

    provenance = replace(base.provenance, source="measured", driver="580.159.04", runtime="CUDA 13.0")
    return Profile(
        provenance=provenance,
        metrics=metrics,
        curves={curve.name: curve},
        unsupported={"mma_throughput_fp8e5m2": "not measured in this test"},
        kernel_builds=builds,
    )
