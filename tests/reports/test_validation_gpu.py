"""On a GPU: a two-shape validate run end to end (precompile, timing, checks, model, peers, autotune, report)."""

from __future__ import annotations

from pathlib import Path

import pytest

from theodolite.cli import main
from theodolite.results import TORCH_KEY, load_results
from theodolite.validation import summarize


@pytest.mark.gpu
def test_validate_two_shapes_on_the_gpu(tmp_path: Path) -> None:
    shapes = tmp_path / "tiny.csv"
    shapes.write_text("name,M,N,K\ntiny,128,256,512\nskinny,16,1024,2048\n")
    out = tmp_path / "v.json"
    argv = ["validate", "--shapes", str(shapes), "--variants", "persistent,splitk", "--peers", "fixed,autotune",
            "--workers", "4", "--profile", _profile_for_this_device(), "-o", str(out)]  # fmt: skip
    assert main(argv) == 0
    results = load_results(out)
    assert [s.name for s in results.shapes] == ["tiny", "skinny"]
    for shape in results.shapes:
        assert shape.torch_ms and shape.torch_ms > 0
        timed = [ms for ms in shape.configs.values() if ms]
        assert len(timed) >= len(shape.configs) // 2, shape.errors
        assert shape.model_pick in shape.configs, shape.errors.get("@model")
        assert shape.autotune_wall_s and shape.peer_picks.get("autotune") in shape.configs
        assert not any(e.startswith("wrong result") for e in shape.errors.values()), shape.errors
        assert "@timing" not in shape.errors, shape.errors["@timing"]  # small inputs: timed as graph replays
        assert shape.final_ms.get(TORCH_KEY, 0) > 0 and shape.final_ms.get(shape.model_pick, 0) > 0, shape.errors
    summary = summarize(results)
    assert summary["efficiency"]["geomean"] is not None and 0 < summary["efficiency"]["geomean"] <= 1
    assert main(["validate", *argv[1:], "--resume"]) == 0  # nothing left: no new measurement
    assert len(load_results(out).shapes) == 2
    assert main(["report", "--results", str(out), "-o", str(tmp_path)]) == 0


@pytest.mark.gpu
def test_final_round_on_flushed_inputs() -> None:
    """Inputs over half the L2: the final round times L2-flushed runs, interleaved; a bad key is an error."""
    from theodolite.kernels import benchmark

    keys = ["persistent/128x128x64/g8/w8/s3/k1", "persistent/64x64x64/g8/w4/s4/k1", "nonsense/1x1x1"]
    timer = benchmark.Timer()
    times, errors = benchmark.final_round(4096, 4096, 4096, keys, benchmark.BenchSettings(), timer)
    assert set(times) == {TORCH_KEY, keys[0], keys[1]} and "nonsense/1x1x1" in errors, errors
    assert all(0.05 < ms < 50 for ms in times.values()), times  # 137 GFLOP: well under 50 ms, over 50 us


def _profile_for_this_device() -> str:
    """This device's profile when one is bundled or cached, else the H100 datasheet (same SM limits as H200)."""
    import torch

    from theodolite.profile.resolve import resolve_profile_path, slug
    from theodolite.validation import load_validation_profile

    try:
        path = resolve_profile_path()
        if slug(load_validation_profile(str(path)).device_name) == slug(torch.cuda.get_device_name()):
            return str(path)
    except Exception:
        pass
    return "datasheet:h100-sxm"
