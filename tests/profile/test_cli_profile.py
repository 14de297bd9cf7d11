from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from theodolite.cli import main
from theodolite.profile import load_profile, save_profile
from theodolite.profile.datasheet import h100_sxm, mi300x


def test_show_prints_values(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    path = save_profile(mi300x(), tmp_path / "p.h5")
    assert main(["profile", "show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "AMD Instinct MI300X" in out and "304" in out and "5.3 TB/s" in out


def test_diff_prints_ratio(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    a = save_profile(mi300x(), tmp_path / "a.h5")
    b = save_profile(h100_sxm(), tmp_path / "b.h5")
    assert main(["profile", "diff", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "2.303" in out  # 304 / 132 SMs


def test_corrupt_file_is_one_line_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.h5"
    bad.write_text("nope")
    result = subprocess.run(
        [sys.executable, "-m", "theodolite", "profile", "show", str(bad)], capture_output=True, text=True
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().count("\n") == 0 and "not an HDF5 file" in result.stderr


def test_datasheet_command_writes_and_refuses_overwrite(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "mi.h5"
    assert main(["profile", "datasheet", "mi300x", "-o", str(out)]) == 0
    assert load_profile(out).device_name == "AMD Instinct MI300X"
    assert main(["profile", "datasheet", "mi300x", "-o", str(out)]) == 2


def test_help_lists_every_command() -> None:
    result = subprocess.run([sys.executable, "-m", "theodolite", "--help"], capture_output=True, text=True)
    for command in ("calibrate", "select", "validate", "report", "profile", "check", "compare", "bench"):
        assert command in result.stdout
