"""The selection-speed benchmark runs on the CPU and reports what the README and the issue quote."""

from __future__ import annotations

import math

from theodolite.model import speed

from theodolite.profile.datasheet import h100_sxm


def test_speed_benchmark_reports_every_figure() -> None:
    result = speed.measure(h100_sxm(), count=200)
    for name in (
        "new_shape_us",
        "new_shape_p90_us",
        "repeated_us",
        "first_in_process_s",
        "first_in_process_cached_s",
        "matmul_overhead_us",
    ):
        assert math.isfinite(result[name]), name
    assert result["new_shape_us"] > 0 and result["first_in_process_s"] > 0
    # the grid loaded from disk (model.grid_cache) instead of built: over ten times faster
    assert result["first_in_process_cached_s"] < result["first_in_process_s"] / 3  # loose: CI machines are noisy
    # a cached shape is a dictionary lookup, a new one runs the model: an order of magnitude apart
    assert result["repeated_us"] < result["new_shape_us"]
    assert result["new_shape_p90_us"] >= result["new_shape_us"]


def test_benchmark_shapes_are_reproducible_and_in_range() -> None:
    shapes = speed._shapes(500, 7)
    assert shapes == speed._shapes(500, 7) and shapes != speed._shapes(500, 8)
    assert all(1 <= d <= 16384 for shape in shapes for d in shape)
