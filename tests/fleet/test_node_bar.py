"""The node bar's comparison (fleet/node_bar.py) on profiles made from the bundled H100 one: deviations, clocks, the
per-metric summary and the verdict; the GPU part of the script is not run here."""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from pathlib import Path

import pytest

from theodolite.profile import Profile, load_profile
from theodolite.profile.resolve import bundled_dir

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def node_bar():
    spec = importlib.util.spec_from_file_location("node_bar", ROOT / "fleet" / "node_bar.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["node_bar"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def h100() -> Profile:
    return load_profile(bundled_dir() / "nvidia-h100-80gb-hbm3.h5")


def scaled(profile: Profile, **factors: float) -> Profile:
    """The profile with metric values scaled; ``NAME__clock`` scales the clock its probe recorded."""
    metrics = dict(profile.metrics)
    for key, factor in factors.items():
        name, _, part = key.partition("__")
        m = metrics[name]
        if part == "clock":
            settings = {**m.settings, "clock_hz_during": m.settings["clock_hz_during"] * factor}
            metrics[name] = dataclasses.replace(m, settings=settings)
        else:
            metrics[name] = dataclasses.replace(m, value=m.value * factor)
    return dataclasses.replace(profile, metrics=metrics)


def judged(name: str) -> bool:
    return not name.startswith("launch_")


def test_identical_profiles_deviate_nowhere(node_bar, h100):
    row = node_bar.deviations(h100, h100, judged)
    assert row["max_judged_deviation"] == 0.0 and row["over_bar"] == {} and row["over_bar_judged"] == []
    assert not any(name.startswith("model_") for name in row["metrics"])
    assert row["clocks"]["clock_sustained_matrix_hz"] == h100.metrics["clock_sustained_matrix_hz"].value


def test_a_clock_bound_shift_is_told_apart_from_a_per_cycle_one(node_bar, h100):
    # fp16 6% slower because its clock was 6% lower (the same FLOP per cycle); bf16 6% slower at the same clock
    node = scaled(h100, mma_throughput_fp16=0.94, mma_throughput_fp16__clock=0.94, mma_throughput_bf16=0.94)
    row = node_bar.deviations(node, h100, judged)
    fp16, bf16 = row["metrics"]["mma_throughput_fp16"], row["metrics"]["mma_throughput_bf16"]
    assert fp16["deviation"] == pytest.approx(-0.06) and fp16["clock_deviation"] == pytest.approx(-0.06)
    assert fp16["per_cycle_deviation"] == pytest.approx(0.0, abs=1e-12)
    assert bf16["clock_deviation"] == pytest.approx(0.0) and bf16["per_cycle_deviation"] == pytest.approx(-0.06)
    assert row["over_bar_judged"] == ["mma_throughput_bf16", "mma_throughput_fp16"]
    assert "clock_hz" not in row["metrics"]["hbm_read_bandwidth"]  # not clock-bound: no clock claimed


def test_per_metric_keeps_the_worst_and_every_round(node_bar, h100):
    rounds = []
    for number, factor in enumerate((1.01, 0.93, 1.02), start=1):
        cards = []
        for gpu in (0, 1):
            node = scaled(h100, hbm_saturation_sms=factor if gpu == 1 else 1.0)
            cards.append({"gpu": gpu, "against": {"full": node_bar.deviations(node, h100, judged)}})
        rounds.append({"round": number, "cards": cards})
    table = node_bar.per_metric(rounds, "full")
    item = table["hbm_saturation_sms"]
    assert item["max_abs_deviation"] == pytest.approx(0.07)
    assert item["worst"] == {"round": 2, "gpu": 1, "deviation": pytest.approx(-0.07)}
    assert len(item["cards"]["1"]["node"]) == 3
    assert item["cards"]["0"]["node"] == [pytest.approx(item["cards"]["0"]["alone"])] * 3
    assert "node_clock_hz" in table["mma_throughput_fp16"]["cards"]["0"]
    assert not node_bar.verdict(rounds, "full")
    assert node_bar.verdict([{**rounds[0]}], "full")  # 1% is within the bar
    assert not node_bar.verdict([{"round": 1, "cards": [{"gpu": 0, "missing": True}]}], "full")
    assert not node_bar.verdict(rounds[:1], "quick")  # no quick alone profile: no verdict against it


def test_main_end_to_end_with_the_gpus_faked(node_bar, h100, tmp_path, monkeypatch, capsys):
    """The whole script with two faked H100s: alone profiles (full and quick), three rounds whose card 1 reads
    hbm_saturation_sms 7% low in round 2; the JSON and the table say so."""
    import shutil

    import torch

    from theodolite.commands.calibrate import _targets
    from theodolite.profile import save_profile

    names = ["NVIDIA H100 80GB HBM3"] * 2
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=0: names[0])
    monkeypatch.setattr(node_bar, "gpu_state", lambda: [])
    monkeypatch.setenv("OUT", str(tmp_path))
    monkeypatch.chdir(ROOT)
    source = bundled_dir() / "nvidia-h100-80gb-hbm3.h5"
    rounds = iter([1.0, 0.93, 1.0])

    def fake_run(command, log):
        log.write_text("sm_90: 898 kernel builds reused from nvidia-h100-80gb-hbm3.h5\n")
        target = Path(command[command.index("-o") + 1]) if "-o" in command else None
        if "--all-devices" in command:
            factor = next(rounds)
            for gpu, path in enumerate(_targets(target, names)):
                path.parent.mkdir(parents=True, exist_ok=True)
                save_profile(scaled(h100, hbm_saturation_sms=factor if gpu == 1 else 1.0), path, overwrite=True)
        elif "calibrate" in command:
            shutil.copy(source, target)
        return 0, 0.1, "PASS"

    monkeypatch.setattr(node_bar, "_run", fake_run)
    assert node_bar.main([]) == 0
    import json

    report = json.loads((tmp_path / "node_bar.json").read_text())
    assert report["alone_kinds"] == ["full", "quick"] and report["bar_reference"] == "full"
    assert [r["round"] for r in report["rounds"]] == [1, 2, 3]
    assert report["bar_no_false_alarm"] is True
    assert report["bar_within_5pct_judged"] == {"full": False, "quick": False}
    worst = report["per_metric"]["full"]["hbm_saturation_sms"]
    assert worst["worst"]["round"] == 2 and worst["worst"]["gpu"] == 1
    assert worst["max_abs_deviation"] == pytest.approx(0.07)
    assert report["rounds"][0]["builds"] and "reused" in report["rounds"][0]["builds"][0]
    out = capsys.readouterr().out
    assert "hbm_saturation_sms 7.0%" in out and "every judged metric within 5%" in out


def test_pack_archives_the_run_within_the_limit(node_bar, tmp_path):
    import tarfile

    work, out = tmp_path / "work", tmp_path / "out"
    (work / "node_r1").mkdir(parents=True)
    out.mkdir()
    (work / "node_r1.log").write_text("calibrate log")
    (work / "node_r1" / "node.html").write_text("<html></html>")
    (work / "node_r1" / "gpu0.h5").write_bytes(b"\0" * 4000)
    (work / "node_r1" / "gpu1.h5").write_bytes(b"\0" * 4000)
    left_out = node_bar.pack(work, out, limit=6000)
    assert [p.name for p in out.iterdir()] == [node_bar.ARCHIVE]  # one file beside the JSON, nothing loose
    with tarfile.open(out / node_bar.ARCHIVE) as archive:
        names = sorted(archive.getnames())
    # logs and pages go first; the second profile no longer fits and is named, not silently dropped
    assert names == ["node_r1.log", "node_r1/gpu0.h5", "node_r1/node.html"]
    assert left_out == ["node_r1/gpu1.h5"]
