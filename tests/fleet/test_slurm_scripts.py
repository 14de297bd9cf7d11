"""The Slurm path's scripts, run by bash with sbatch, hostname and the calibrating python faked."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from theodolite.profile import Profile, load_profile, save_profile
from theodolite.profile.resolve import bundled_dir

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")

ROOT = Path(__file__).resolve().parents[2]
SLURM = ROOT / "fleet" / "slurm"
REFERENCE = bundled_dir() / "nvidia-h100-80gb-hbm3.h5"


def _fake_tools(folder: Path) -> tuple[Path, Path]:
    """sbatch (prints job ids 4242, 4243), hostname (node07) and python3 (logs its arguments)."""
    bin_dir, log = folder / "bin", folder / "calls.log"
    bin_dir.mkdir()
    scripts = {
        "sbatch": f'echo "sbatch $*" >> {log}\nn=$(grep -c ^sbatch {log}); echo "424$((n + 1));cluster"',
        "hostname": "echo node07",
        "python3": f'echo "python3 $*" >> {log}',
    }
    for name, body in scripts.items():
        tool = bin_dir / name
        tool.write_text(f"#!/bin/bash\n{body}\n")
        tool.chmod(0o755)
    return bin_dir, log


def _run(script: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(script), *args], env=env, capture_output=True, text=True, timeout=120)


def test_submit_queues_the_array_then_the_check(tmp_path: Path) -> None:
    bin_dir, log = _fake_tools(tmp_path)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "FLEET_DIR": str(tmp_path / "run")}
    done = _run(SLURM / "submit.sh", env, "4", "--partition=gpu")
    assert done.returncode == 0, done.stderr
    first, second = log.read_text().splitlines()
    assert first.startswith("sbatch --parsable --array=0-3 --export=ALL --partition=gpu ")
    assert first.endswith("fleet/slurm/calibrate.sbatch")
    assert "--dependency=afterany:4242 --export=ALL,EXPECTED_NODES=4 --partition=gpu" in second
    assert second.endswith("fleet/slurm/check.sbatch")
    assert "calibration array 4242 (4 node(s)), check 4243" in done.stdout
    assert _run(SLURM / "submit.sh", {**env, "FLEET_DIR": ""}, "4").returncode != 0  # no shared folder: refused


def test_each_array_element_calibrates_its_node_into_the_shared_folder(tmp_path: Path) -> None:
    bin_dir, log = _fake_tools(tmp_path)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "FLEET_DIR": str(tmp_path / "run")}
    assert _run(SLURM / "calibrate.sbatch", env).returncode == 0
    assert log.read_text().splitlines() == [
        f"python3 -m theodolite calibrate --all-devices -o {tmp_path / 'run' / 'node07'}/"
    ]
    assert _run(SLURM / "calibrate.sbatch", {**env, "CALIBRATE_ARGS": "--quick --sequential"}).returncode == 0
    assert log.read_text().splitlines()[-1].startswith("python3 -m theodolite calibrate --all-devices --quick --seq")
    directives = [line for line in (SLURM / "calibrate.sbatch").read_text().splitlines() if line.startswith("#SBATCH")]
    assert "#SBATCH --nodes=1" in directives and "#SBATCH --exclusive" in directives


def _node(folder: Path, reference: Profile, slow: bool = False) -> None:
    for gpu in range(2):
        profile = reference
        if slow and gpu == 1:
            m = reference.metrics["hbm_read_bandwidth"]
            profile = replace(reference, metrics={**reference.metrics, m.name: replace(m, value=m.value * 0.85)})
        save_profile(profile, folder / f"nvidia-h100-80gb-hbm3-gpu{gpu}.h5")


def test_the_check_step_judges_every_collected_profile(tmp_path: Path) -> None:
    """check.sbatch with the real theodolite over two nodes' profiles: pass, then a slow card, then a lost node."""
    reference = load_profile(REFERENCE)
    python = tmp_path / "python"
    python.symlink_to(sys.executable)
    env = {
        **os.environ,
        "FLEET_DIR": str(tmp_path / "run"),
        "REFERENCE": str(REFERENCE),
        "PYTHON": str(python),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    _node(tmp_path / "run" / "node01", reference)
    _node(tmp_path / "run" / "node02", reference)
    done = _run(SLURM / "check.sbatch", env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "4 profile(s) from 2 node(s)" in done.stdout and (tmp_path / "run" / "fleet.html").is_file()
    assert _run(SLURM / "check.sbatch", {**env, "EXPECTED_NODES": "3"}).returncode == 1  # a node wrote nothing
    _node(tmp_path / "run" / "node03", reference, slow=True)
    done = _run(SLURM / "check.sbatch", env)
    assert done.returncode == 1 and "node03/nvidia-h100-80gb-hbm3-gpu1.h5" in done.stdout
    assert _run(SLURM / "check.sbatch", {**env, "FLEET_DIR": str(tmp_path / "empty")}).returncode == 2
