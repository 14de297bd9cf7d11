"""Results file: round trip, atomic write, clear errors, shard merge."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from theodolite.results import (
    TORCH_KEY,
    Results,
    ResultsError,
    ShapeResult,
    load_results,
    merge_results,
    results_stem,
    save_results,
)


def _results(*shapes: ShapeResult) -> Results:
    return Results(device="Test GPU", command="theodolite bench", shapes=list(shapes))


def test_round_trip_keeps_every_field(tmp_path: Path) -> None:
    shape = ShapeResult(
        "a", 128, 256, 512, torch_ms=0.5, configs={"x": 0.4, "y": None}, errors={"y": "boom"}, model_pick="x"
    )
    path = save_results(_results(shape), tmp_path / "r.json")
    loaded = load_results(path)
    assert loaded.device == "Test GPU"
    assert loaded.shapes[0] == shape
    assert loaded.shapes[0].best() == ("x", 0.4)


def test_gz_path_writes_compressed_deterministic_bytes_read_back_alike(tmp_path: Path) -> None:
    """A ``.gz`` results path is written gzip-compressed (several times smaller), byte-identical for the same results
    (no timestamp in the header), and reads back as the plain file does; a truncated one is a clear error."""
    import gzip

    shapes = [
        ShapeResult(f"s{i}", 64 * i + 1, 128, 512, torch_ms=0.5, configs={"x": 0.4, "y": 0.41}) for i in range(50)
    ]
    plain = save_results(_results(*shapes), tmp_path / "r.json")
    packed = save_results(_results(*shapes), tmp_path / "r.json.gz")
    assert packed.read_bytes()[:2] == b"\x1f\x8b" and gzip.decompress(packed.read_bytes()) == plain.read_bytes()
    assert packed.stat().st_size * 4 < plain.stat().st_size
    assert save_results(_results(*shapes), tmp_path / "again.json.gz").read_bytes() == packed.read_bytes()
    assert load_results(packed) == load_results(plain)
    assert results_stem(packed) == results_stem(plain) == "r" and results_stem("a/b.v2.json.gz") == "b.v2"
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(packed.read_bytes()[:100])
    with pytest.raises(ResultsError, match="not a readable results file"):
        load_results(cut)


def test_best_ignores_failed_configs_and_flops() -> None:
    shape = ShapeResult("a", 2, 3, 4, configs={"x": None, "y": 2.0, "z": 1.0})
    assert shape.best() == ("z", 1.0)
    assert shape.flops == 48
    assert shape.tflops(1.0) == pytest.approx(48 / 1e-3 / 1e12)
    assert ShapeResult("b", 1, 1, 1).best() is None


def test_final_round_comparisons_and_version_one_files(tmp_path: Path) -> None:
    shape = ShapeResult("a", 2, 3, 4, torch_ms=2.0, configs={"x": 1.0, "y": 1.2, "z": None})
    assert shape.versus_best("y") == (pytest.approx(1.0 / 1.2), "sweep")
    assert shape.versus_best("z") == (None, "sweep") and shape.torch_versus(None) == pytest.approx(2.0)
    shape.final_ms = {TORCH_KEY: 1.5, "x": 1.3, "y": 1.25}
    assert shape.final_best() == ("y", 1.25)
    assert shape.versus_best("x") == (pytest.approx(1.25 / 1.3), "final")
    assert shape.torch_versus(None) == pytest.approx(1.5 / 1.25)
    assert shape.torch_versus("x") == pytest.approx(1.5 / 1.3)
    old = tmp_path / "v1.json"  # written before the final round existed: still read, without one
    data = save_results(_results(ShapeResult("b", 1, 1, 1, configs={"x": 1.0})), old)
    raw = json.loads(data.read_text())
    raw["version"] = 1
    del raw["shapes"][0]["final_ms"]
    old.write_text(json.dumps(raw))
    assert load_results(old).shapes[0].final_ms == {}


def test_nan_is_refused_and_no_file_is_left(tmp_path: Path) -> None:
    target = tmp_path / "r.json"
    with pytest.raises(ValueError):
        save_results(_results(ShapeResult("a", 1, 1, 1, torch_ms=math.nan)), target)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("content", "message"),
    [("{", "not a readable"), ("[]", "not a theodolite results"), ('{"format": "other"}', "not a theodolite")],
)
def test_bad_files_give_clear_errors(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(ResultsError, match=message):
        load_results(path)


def test_missing_and_newer_files(tmp_path: Path) -> None:
    with pytest.raises(ResultsError, match="no such"):
        load_results(tmp_path / "missing.json")
    path = tmp_path / "new.json"
    path.write_text(json.dumps({"format": "theodolite-results", "version": 99, "shapes": []}))
    with pytest.raises(ResultsError, match="newer"):
        load_results(path)


def test_merge_keeps_one_entry_per_shape_later_wins() -> None:
    first = _results(ShapeResult("a", 1, 1, 1, torch_ms=1.0), ShapeResult("b", 2, 2, 2))
    second = _results(ShapeResult("a", 1, 1, 1, torch_ms=2.0))
    merged = merge_results([first, second])
    assert [s.name for s in merged.shapes] == ["a", "b"]
    assert merged.shapes[0].torch_ms == 2.0
    with pytest.raises(ResultsError):
        merge_results([])


def test_written_file_is_readable_by_others(tmp_path: Path) -> None:
    path = save_results(_results(ShapeResult("a", 1, 1, 1)), tmp_path / "r.json")
    old = os.umask(0o022)
    os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o666 & ~old
