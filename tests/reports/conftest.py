"""Synthetic profiles and results for the report tests (no GPU, known answers)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from theodolite.profile import Curve, KernelBuild, Measurement, Profile
from theodolite.profile.datasheet import h100_sxm


def synthetic_measured(scale_hbm: float = 1.0, memory_bytes: float | None = None, seed: int = 3) -> Profile:
    """A datasheet H100 turned 'measured': samples on key metrics and one curve of each kind the probes write."""
    base = h100_sxm()
    rng = np.random.default_rng(seed)
    metrics = dict(base.metrics)

    def sampled(name: str, value: float, unit: str, method: str) -> None:
        metrics[name] = Measurement.from_samples(name, value * (1 + 0.005 * rng.standard_normal(9)), unit, method)

    sampled("hbm_read_bandwidth", 3.0e12 * scale_hbm, "B/s", "hbm_bandwidth")
    sampled("l2_bandwidth", 9.0e12, "B/s", "l2_bandwidth")
    sampled("mma_throughput_bf16", 700e12, "FLOP/s", "mma_throughput")
    sampled("smem_latency", 30.0, "cycle", "smem_latency")
    sampled("l2_latency_near", 260.0, "cycle", "pointer_chase")
    sampled("l2_latency_far", 480.0, "cycle", "pointer_chase")
    sampled("hbm_latency", 800.0, "cycle", "pointer_chase")
    sampled("hbm_saturation_sms", 64.0, "1", "hbm.read_cg_programs")
    if memory_bytes is not None:
        metrics["memory_bytes"] = Measurement("memory_bytes", memory_bytes, "B", "driver")
    sizes = np.geomspace(1 << 16, 1 << 32, 33)
    bandwidth = np.where(sizes < 40e6, 9e12, 3e12 * scale_hbm)
    chase = np.where(sizes < 256e3, 30.0, np.where(sizes < 40e6, 300.0, 800.0))
    programs = np.arange(1, 529)
    per_program = 5.3e12
    flops = programs * per_program / np.ceil(programs / 132) / 1.0
    sms = np.array([1, 2, 4, 8, 16, 32, 64, 96, 132], dtype=float)
    hist_x = np.linspace(200, 600, 64)
    # The names, units and labels the probes write (probes/l2.py, hbm.py, matrix.py, clock.py), plus a pointer chase.
    curves = [
        Curve(
            "l2_bandwidth_vs_working_set",
            sizes,
            bandwidth,
            "B",
            "B/s",
            "l2.read_cg_sweep",
            "working set",
            "read bandwidth",
            y_low=bandwidth * 0.97,
            y_high=bandwidth * 1.02,
            attrs={"l2_bytes_driver": 50 * 2**20, "knee_bytes": 40e6},
        ),
        Curve("pointer_chase_latency", sizes, chase, "B", "cycle", "pointer_chase", "footprint", "latency"),
        Curve(
            "matrix_wave_staircase",
            programs.astype(float),
            flops,
            "1",
            "FLOP/s",
            "matrix.staircase",
            "programs launched",
            "bf16 throughput",
            attrs={"wave_width": 132.0, "tile": "128x256x64/w8"},
        ),
        Curve(
            "hbm_read_bandwidth_vs_sms",
            sms,
            3e12 * scale_hbm * np.minimum(1, sms / 64),
            "1",
            "B/s",
            "hbm.read_cg_programs",
            "programs (one 1024-thread program per SM)",
            "HBM read bandwidth",
        ),
        Curve(
            "l2_bandwidth_vs_sms",
            sms,
            9e12 * sms / 132,
            "1",
            "B/s",
            "l2.read_cg_programs",
            "programs (one per SM)",
            "L2 read bandwidth",
        ),
        Curve(
            "l2_latency_histogram",
            hist_x,
            np.exp(-(((hist_x - 300) / 40) ** 2)),
            "cycle",
            "1",
            "l2.chase_smid",
            "per-hop latency",
            "hops",
        ),
        Curve(
            "clock_under_matrix_load",
            np.linspace(0, 2, 50),
            np.linspace(1.2e9, 1.98e9, 50),
            "s",
            "Hz",
            "clock.matrix",
            "time",
            "SM clock",
        ),
    ]
    builds = (KernelBuild("persistent", "persistent/128x256x64/g8/w8/s3/k1", "bf16", "sm_90", 168, 0, 147456, 3),)
    provenance = replace(base.provenance, source="measured", driver="580.1", runtime="CUDA 13.0", host="test")
    return Profile(
        provenance=provenance,
        metrics=metrics,
        curves={c.name: c for c in curves},
        unsupported={"mma_throughput_fp8e5m2": "not measured in this test"},
        kernel_builds=builds,
        origin="synthetic.h5",
    )


@pytest.fixture
def measured() -> Profile:
    return synthetic_measured()


@pytest.fixture
def make_measured():  # noqa: ANN201 - a factory fixture
    return synthetic_measured
