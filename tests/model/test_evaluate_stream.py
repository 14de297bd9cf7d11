"""Predicted / measured on the time a kernel takes within a stream of work (``model.evaluate.in_stream_ms``)."""

import math

import pytest
from theodolite.model.evaluate import ShapeScore, absolute_accuracy, in_stream_ms

from theodolite.results import ShapeResult

FLOOR = {"flushed_ms": 0.0031, "graph_ms": 0.0007, "l2_bytes": 50.0 * 2**20}


def _shape(m: int, n: int, k: int) -> ShapeResult:
    return ShapeResult("s", m, n, k, torch_ms=0.02, configs={"x": 0.02})


def test_flushed_shape_loses_the_event_bracket() -> None:
    """A weight stream (33.5 MB of bf16 weights: over half the L2) is timed flushed: 2.4 µs of bracket come off."""
    assert in_stream_ms(_shape(1, 4096, 4096), 0.0200, FLOOR) == pytest.approx(0.0176)


def test_rotated_shape_is_unchanged() -> None:
    """A shape that fits in L2 is timed in graph replays, as the model predicts it: nothing comes off."""
    assert in_stream_ms(_shape(64, 256, 256), 0.0040, FLOOR) == 0.0040


def test_no_floor_no_correction() -> None:
    """Results made before the floors were recorded: nan, so absolute_accuracy keeps the measured time."""
    assert math.isnan(in_stream_ms(_shape(1, 4096, 4096), 0.02, None))
    score = ShapeScore("s", 1, 4096, 4096, "p", "p", 0.02, 0.02, 1.0, 1.0, 0.02, predicted_ms=0.01)
    assert absolute_accuracy([score])["median"] == pytest.approx(0.5)
    score.pick_stream_ms = 0.0125
    assert absolute_accuracy([score])["median"] == pytest.approx(0.8)


def test_a_floor_read_upside_down_takes_nothing_off() -> None:
    """A graph figure above the flushed one (host-driven launches read when capture was refused: 5.8 against 2.8 µs
    on an H200) is no bracket: the measured time stays, never grows."""
    upside_down = {**FLOOR, "graph_ms": 0.0058, "flushed_ms": 0.0028}
    assert in_stream_ms(_shape(1, 4096, 4096), 0.0200, upside_down) == 0.0200


def test_floors_without_graph_replays_keep_the_flushed_figure() -> None:
    """``timing_floors``' record: the timer's eager fallback gives the graph figure the flushed one (and says so)."""
    from theodolite.kernels.benchmark import floors

    assert floors(0.0028, 0.0009, "graph", 50 * 2**20)["graph_ms"] == 0.0009
    with pytest.warns(UserWarning, match="graph capture failed"):
        record = floors(0.0028, 0.0058, "eager (graph capture failed: RuntimeError: x)", 50 * 2**20)
    assert record == {"flushed_ms": 0.0028, "graph_ms": 0.0028, "l2_bytes": 50.0 * 2**20}
