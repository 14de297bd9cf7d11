"""probes.remeasure: one probe's metrics into an existing profile (the pure parts; the probe itself runs on a GPU)."""

from __future__ import annotations

import dataclasses

import pytest
from theodolite.probes.common import ProbeResult
from theodolite.probes.remeasure import check_same_device, main, merge_measured, probe_metrics

from theodolite.errors import ProfileError
from theodolite.profile import load_profile, save_profile
from theodolite.profile.datasheet import h100_sxm
from theodolite.profile.schema import Measurement

H100_PATH = "profiles/nvidia-h100-80gb-hbm3.h5"
GRAPH = Measurement(name="launch_overhead_graph", value=1.2e-6, unit="s", method="launch.graph_back_to_back")


@pytest.fixture(scope="module")
def h100():  # type: ignore[no-untyped-def]
    profile = load_profile(H100_PATH)
    metrics = {k: v for k, v in profile.metrics.items() if k != "launch_overhead_graph"}
    return dataclasses.replace(profile, metrics=metrics)


def test_probe_metrics_name_the_probes_writes() -> None:
    assert "launch_overhead_graph" in probe_metrics("launch")
    with pytest.raises(ProfileError, match="no probe 'lunch'"):
        probe_metrics("lunch")


def test_only_the_profiles_own_gpu_remeasures_it(h100) -> None:  # type: ignore[no-untyped-def]
    check_same_device(h100, "NVIDIA H100 80GB HBM3")
    with pytest.raises(ProfileError, match="this GPU is 'NVIDIA H200'"):
        check_same_device(h100, "NVIDIA H200")
    with pytest.raises(ProfileError, match="datasheet"):
        check_same_device(h100_sxm(), h100_sxm().provenance.device_name)


def test_merge_adds_the_metric_and_says_so(h100, tmp_path) -> None:  # type: ignore[no-untyped-def]
    updated = merge_measured(h100, ProbeResult(metrics={GRAPH.name: GRAPH}), [GRAPH.name], False, "2026-11-27: x")
    assert updated.metrics[GRAPH.name].value == 1.2e-6
    assert {k: v.value for k, v in updated.metrics.items() if k != GRAPH.name} == {
        k: v.value for k, v in h100.metrics.items()
    }
    assert updated.provenance.notes.endswith("; 2026-11-27: x") and updated.provenance.notes.startswith(
        h100.provenance.notes
    )
    assert updated.fingerprint != h100.fingerprint
    save_profile(updated, tmp_path / "p.h5")
    assert load_profile(tmp_path / "p.h5").metrics[GRAPH.name].value == 1.2e-6


def test_merge_refuses_a_held_metric_without_replace_and_a_missing_one(h100) -> None:  # type: ignore[no-untyped-def]
    held = merge_measured(h100, ProbeResult(metrics={GRAPH.name: GRAPH}), [GRAPH.name], False, "")
    again = dataclasses.replace(GRAPH, value=2e-6)
    with pytest.raises(ProfileError, match="already holds launch_overhead_graph"):
        merge_measured(held, ProbeResult(metrics={GRAPH.name: again}), [GRAPH.name], False, "")
    assert (
        merge_measured(held, ProbeResult(metrics={GRAPH.name: again}), [GRAPH.name], True, "").metrics[GRAPH.name].value
        == 2e-6
    )
    failed = ProbeResult(unsupported={GRAPH.name: "probe launch failed: RuntimeError: capture"})
    with pytest.raises(ProfileError, match="did not measure launch_overhead_graph .*capture"):
        merge_measured(h100, failed, [GRAPH.name], False, "")


def test_cli_refuses_an_unknown_probe_or_metric_before_any_gpu_work(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main([H100_PATH, "--probe", "lunch"]) == 1
    assert "no probe 'lunch'" in capsys.readouterr().err
    assert main([H100_PATH, "--probe", "launch", "--metrics", "l2_bandwidth"]) == 1
    assert "does not write l2_bandwidth" in capsys.readouterr().err


def test_cli_writes_every_profile_or_none(h100, tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """The probe faked (no GPU here): a refusal on the second profile leaves the first file untouched; with
    --replace both gain the measured value and a provenance line."""
    import shutil

    import torch
    from theodolite.probes import runner

    fresh, held = tmp_path / "fresh.h5", tmp_path / "held.h5"
    save_profile(h100, fresh)
    save_profile(merge_measured(h100, ProbeResult(metrics={GRAPH.name: GRAPH}), [GRAPH.name], False, ""), held)
    measured = dataclasses.replace(GRAPH, value=9.9e-7)
    monkeypatch.setattr(runner, "require_device", lambda device: None)
    monkeypatch.setattr(runner, "collect", lambda device, only: (ProbeResult(metrics={GRAPH.name: measured}), {}))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: h100.provenance.device_name)
    before = fresh.read_bytes()
    argv = [str(fresh), str(held), "--probe", "launch", "--metrics", GRAPH.name]
    assert main(argv) == 1
    assert "already holds launch_overhead_graph" in capsys.readouterr().err
    assert fresh.read_bytes() == before
    assert main([*argv, "--replace"]) == 0
    for path in (fresh, held):
        profile = load_profile(path)
        assert profile.metrics[GRAPH.name].value == 9.9e-7
        assert "launch_overhead_graph measured later (probes.remeasure --probe launch" in profile.provenance.notes
    shutil.copy(H100_PATH, tmp_path / "other.h5")
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H200")
    assert main([str(tmp_path / "other.h5"), "--probe", "launch"]) == 1
    assert "this GPU is 'NVIDIA H200'" in capsys.readouterr().err
