"""The calibrate command without a GPU: clear error, --force, atomic write, Ctrl-C leaves no file."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from theodolite.probes import runner
from theodolite.probes.runner import RunOutcome

from theodolite.cli import main
from theodolite.commands import calibrate
from theodolite.profile import load_profile
from theodolite.profile.datasheet import h100_sxm


def test_no_gpu_gives_one_line_and_exit_2(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    code = main(["calibrate", "-o", str(tmp_path / "x.h5")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and "no GPU" in err[0]
    assert not (tmp_path / "x.h5").exists()
    assert main(["calibrate", "--all-devices", "-o", str(tmp_path)]) == 2


def _fake(monkeypatch, calls: list[str], *, interrupt: bool = False) -> None:
    monkeypatch.setattr(runner, "require_device", lambda device: None)
    monkeypatch.setattr("torch.cuda.get_device_name", lambda device=None: "NVIDIA H100 80GB HBM3")

    def fake_run(device: int, quick: bool, with_builds: bool, progress) -> RunOutcome:
        calls.append("run")
        progress("topology", 0, 2)
        if interrupt:
            raise KeyboardInterrupt
        progress("matrix", 1, 2)
        return RunOutcome(profile=h100_sxm(), references={"torch_copy_bandwidth": 3.0e12}, probe_seconds={"x": 1.0})

    monkeypatch.setattr(calibrate, "run_probes", fake_run)

    def fake_model(profile, quick, progress, exclude=()):  # type: ignore[no-untyped-def]
        calls.append("model")
        progress("model fit", 0, 1)
        return profile, {"model fit": 0.5}

    monkeypatch.setattr(calibrate, "run_model_stage", fake_model)


def test_writes_valid_profile_and_refuses_overwrite(monkeypatch, tmp_path, capsys):
    calls: list[str] = []
    _fake(monkeypatch, calls)
    target = tmp_path / "sub" / "p.h5"
    assert main(["calibrate", "-o", str(target)]) == 0
    profile = load_profile(target)
    assert profile.value("sm_count") == h100_sxm().value("sm_count")
    before = target.stat().st_mtime_ns
    # existing output without --force: one-line error, file untouched, probes not even run
    assert main(["calibrate", "-o", str(target)]) == 2
    assert "--force" in capsys.readouterr().err
    assert target.stat().st_mtime_ns == before
    assert calls == ["run", "model"]
    assert main(["calibrate", "-o", str(target), "--force", "--no-model"]) == 0
    assert calls == ["run", "model", "run"]
    assert not [p for p in target.parent.iterdir() if p.name != "p.h5"]  # no temporary left


def test_ctrl_c_leaves_no_file(monkeypatch, tmp_path):
    _fake(monkeypatch, [], interrupt=True)
    target = tmp_path / "p.h5"
    assert main(["calibrate", "-o", str(target)]) == 130
    assert list(tmp_path.iterdir()) == []


def test_default_path_is_user_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    path = calibrate.default_path("NVIDIA H100 80GB HBM3")
    assert path == Path(tmp_path) / "theodolite" / "profiles" / "nvidia-h100-80gb-hbm3.h5"


def test_arguments_parse():
    parser = argparse.ArgumentParser()
    calibrate.add_arguments(parser)
    args = parser.parse_args(["--device", "1", "--quick", "-o", "a.h5", "--force"])
    assert args.device == 1 and args.quick and args.force and args.output == Path("a.h5")
    assert not args.all_devices


def test_unsupported_recorded_when_probe_fails(monkeypatch):
    """A failing probe's metrics land in unsupported with the reason; the rest continue."""
    from theodolite.probes.common import ProbeResult

    class Broken:
        @staticmethod
        def run(ctx):
            raise RuntimeError("boom")

    results = {}
    for name, _, writes in runner.PROBES:
        results[name] = writes
    assert "hbm_copy_bandwidth" in results["hbm"]
    merged = ProbeResult()
    merged.merge(ProbeResult(unsupported={"x": "y"}))
    assert merged.unsupported == {"x": "y"}
    with pytest.raises(RuntimeError):
        Broken.run(None)


def test_kernel_builds_skip_is_noted_not_fatal(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "theodolite.kernels.build", None)
    builds, note = runner.kernel_builds("sm_90", print)
    assert builds == () and "skipped" in note


def test_kernel_builds_failure_is_noted_not_fatal(monkeypatch):
    def broken(architecture, timeout_s):
        raise RuntimeError("ptxas missing")

    monkeypatch.setattr(runner, "_compile_in_subprocess", broken)
    monkeypatch.setattr(runner, "reusable_builds", lambda architecture, key: None)  # nothing to reuse: compile
    builds, note = runner.kernel_builds("sm_90", print)
    assert builds == () and "ptxas missing" in note


def test_kernel_builds_are_reused_from_a_profile_of_the_same_kernel_sources(monkeypatch):
    """The bundled H100 profile's builds carry today's kernel-source key: a calibration of sm_90 reuses them and
    compiles nothing; another key (other kernel sources or Triton) or another architecture finds none."""
    from theodolite.kernels.build import kernel_source_key

    def never(architecture, timeout_s):
        raise AssertionError("compiled although a profile's builds could be reused")

    monkeypatch.setattr(runner, "_compile_in_subprocess", never)
    builds, note = runner.kernel_builds("sm_90", print)
    assert len(builds) > 1000 and "reused" in note and kernel_source_key() in note
    assert {b.dtype for b in builds} >= {"bf16", "fp16", "tf32", "fp32", "fp8e4m3", "fp8e5m2"}
    assert runner.reusable_builds("sm_90", "0" * 16) is None
    assert runner.reusable_builds("sm_80", kernel_source_key()) is None


def test_kernel_builds_come_back_from_the_subprocess(monkeypatch):
    """The child's JSON line becomes KernelBuild records (child faked by a tiny script)."""
    import json

    row = {
        "variant": "persistent",
        "config_key": "persistent/128x256x64/g8/w8/s3/k1",
        "dtype": "bf16",
        "architecture": "sm_90",
        "n_regs": 168,
        "n_spills": 0,
        "shared_bytes": 98304,
        "num_stages": 3,
    }
    script = f"print('noise'); print({runner._BUILD_MARKER!r} + {json.dumps(json.dumps([row]))})"
    monkeypatch.setattr(runner, "_BUILD_SCRIPT", script)
    builds = runner._compile_in_subprocess("sm_90", 60)
    assert len(builds) == 1 and builds[0].n_regs == 168 and builds[0].config_key == row["config_key"]


def test_model_only_refuses_another_gpus_profile(monkeypatch, tmp_path, capsys):
    calls: list[str] = []
    _fake(monkeypatch, calls)
    source = tmp_path / "h100.h5"
    assert main(["calibrate", "-o", str(source), "--no-model"]) == 0
    monkeypatch.setattr("torch.cuda.get_device_name", lambda device=None: "NVIDIA H200")
    assert main(["calibrate", "--model-only", str(source), "-o", str(tmp_path / "out.h5")]) == 2
    assert "H200" in capsys.readouterr().err and calls == ["run"]
    monkeypatch.setattr("torch.cuda.get_device_name", lambda device=None: "NVIDIA H100 80GB HBM3")
    assert main(["calibrate", "--model-only", str(source), "-o", str(tmp_path / "out.h5")]) == 0
    assert calls == ["run", "model"] and (tmp_path / "out.h5").exists()
