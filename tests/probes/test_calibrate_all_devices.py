"""calibrate --all-devices with the GPUs faked: builds once per architecture, before any card is timed."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
from theodolite.probes import runner

from theodolite.cli import main
from theodolite.commands import calibrate
from theodolite.profile import KernelBuild, load_profile, save_profile
from theodolite.profile.datasheet import h100_sxm

H100 = ("NVIDIA H100 80GB HBM3", "sm_90")


class FakeChild:
    """A per-GPU calibration process: 'times' its GPU for a while, then writes a build-less profile."""

    def __init__(self, command: list[str], events: list[tuple[str, str, float, float]], fail: bool = False):
        self.command = command
        self.code = 3 if fail else 0
        device = command[command.index("--device") + 1]
        target = Path(command[command.index("-o") + 1])

        def model_stage() -> None:  # --model-only: the card's own profile, builds merged, gains its parameters
            begin = time.perf_counter()
            profile = load_profile(target)
            events.append(("model", f"{device}:{len(profile.kernel_builds)}", begin, time.perf_counter()))
            save_profile(replace(profile, origin=str(target)), target, overwrite=True)

        def work() -> None:
            if "--model-only" in command:
                model_stage()
                return
            begin = time.perf_counter()
            time.sleep(0.15)
            events.append(("timing", device, begin, time.perf_counter()))
            if not fail:
                profile = h100_sxm()
                notes = "quick run; spread guard: every probe within its limits on the first attempt"
                save_profile(replace(profile, provenance=replace(profile.provenance, notes=notes)), target)

        self.thread = threading.Thread(target=work)
        self.thread.start()

    def wait(self) -> int:
        self.thread.join()
        return self.code


def _fake(monkeypatch, table, *, fail: set[str] = frozenset()):  # noqa: ANN001, ANN202
    events: list[tuple[str, str, float, float]] = []
    commands: list[list[str]] = []
    monkeypatch.setattr(calibrate, "devices", lambda: list(table))

    def builds(arch: str, log) -> tuple[tuple[KernelBuild, ...], str]:  # noqa: ANN001
        begin = time.perf_counter()
        time.sleep(0.1)
        events.append(("builds", arch, begin, time.perf_counter()))
        build = KernelBuild("persistent", "persistent/128x256x64/g8/w8/s3/k1", "bf16", arch, 168, 0, 147456, 3)
        return (build,), "1 kernel builds"

    def spawn(command: list[str]) -> FakeChild:
        commands.append(command)
        return FakeChild(command, events, fail=command[command.index("--device") + 1] in fail)

    monkeypatch.setattr(runner, "kernel_builds", builds)
    monkeypatch.setattr(calibrate, "spawn", spawn)
    return events, commands


def test_builds_compile_once_before_any_timing_and_land_in_every_profile(monkeypatch, tmp_path: Path) -> None:
    events, commands = _fake(monkeypatch, [H100, H100])
    assert main(["calibrate", "--all-devices", "--quick", "-o", str(tmp_path)]) == 0
    builds = [e for e in events if e[0] == "builds"]
    timing = [e for e in events if e[0] == "timing"]
    assert [b[1] for b in builds] == ["sm_90"] and len(timing) == 2
    assert builds[0][3] <= min(t[2] for t in timing)  # the compile ended before the first card was timed
    # the two cards were timed side by side (default), each child told not to build
    assert max(t[2] for t in timing) < min(t[3] for t in timing)
    probes = [c for c in commands if "--model-only" not in c]
    assert all("--no-builds" in c and "--no-model" in c and "--quick" in c for c in probes)
    assert [c[c.index("--device") + 1] for c in probes] == ["0", "1"]
    # the model stage ran per card after every card's probes, on the profile with the node's builds merged in
    model = [e for e in events if e[0] == "model"]
    assert sorted(e[1] for e in model) == ["0:1", "1:1"]
    assert min(e[2] for e in model) >= max(t[3] for t in timing)
    for name in ("nvidia-h100-80gb-hbm3.h5", "nvidia-h100-80gb-hbm3-gpu1.h5"):
        profile = load_profile(tmp_path / name)
        assert len(profile.kernel_builds) == 1 and profile.kernel_builds[0].architecture == "sm_90"
        assert profile.provenance.notes.startswith("1 kernel builds (compiled once for the node's 2 card(s)")
        assert "spread guard" in profile.provenance.notes


def test_sequential_times_one_card_at_a_time(monkeypatch, tmp_path: Path) -> None:
    events, _ = _fake(monkeypatch, [H100, H100, H100])
    assert main(["calibrate", "--all-devices", "--sequential", "-o", str(tmp_path)]) == 0
    timing = sorted((e for e in events if e[0] == "timing"), key=lambda e: e[2])
    assert len(timing) == 3
    for first, second in zip(timing, timing[1:], strict=False):
        assert first[3] <= second[2]


def test_mixed_node_builds_once_per_architecture(monkeypatch, tmp_path: Path) -> None:
    events, _ = _fake(monkeypatch, [H100, ("NVIDIA H200", "sm_90"), ("NVIDIA A100-SXM4-80GB", "sm_80")])
    assert main(["calibrate", "--all-devices", "-o", str(tmp_path)]) == 0
    assert [e[1] for e in events if e[0] == "builds"] == ["sm_90", "sm_80"]
    a100 = load_profile(tmp_path / "nvidia-a100-sxm4-80gb.h5")
    assert a100.kernel_builds[0].architecture == "sm_80"  # the merge used the card's own architecture's builds


def test_no_builds_and_a_failed_card(monkeypatch, tmp_path: Path, capsys) -> None:
    events, commands = _fake(monkeypatch, [H100, H100], fail={"1"})
    assert main(["calibrate", "--all-devices", "--no-builds", "-o", str(tmp_path)]) == 3
    assert not [e for e in events if e[0] == "builds"]
    assert load_profile(tmp_path / "nvidia-h100-80gb-hbm3.h5").kernel_builds == ()
    assert not (tmp_path / "nvidia-h100-80gb-hbm3-gpu1.h5").exists()
    # the failed card gets no model stage; the good one does
    assert [c[c.index("--device") + 1] for c in commands if "--model-only" in c] == ["0"]
    assert "failed (exit 3)" in capsys.readouterr().out


def test_no_model_skips_the_model_stage(monkeypatch, tmp_path: Path) -> None:
    events, commands = _fake(monkeypatch, [H100, H100])
    assert main(["calibrate", "--all-devices", "--no-model", "-o", str(tmp_path)]) == 0
    assert not [e for e in events if e[0] == "model"] and not [c for c in commands if "--model-only" in c]


def test_existing_profile_refused_before_anything_runs(monkeypatch, tmp_path: Path) -> None:
    events, commands = _fake(monkeypatch, [H100])
    save_profile(h100_sxm(), tmp_path / "nvidia-h100-80gb-hbm3.h5")
    assert main(["calibrate", "--all-devices", "-o", str(tmp_path)]) == 2
    assert events == [] and commands == []
    with pytest.raises(SystemExit):
        main(["calibrate", "--all-devices", "-o", str(tmp_path / "x.h5"), "--bogus"])
