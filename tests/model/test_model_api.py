"""CPU tests of theodolite.api.select / Selection.explain and the select CLI."""

from __future__ import annotations

import subprocess
import sys

from theodolite.api import Selection, select
from theodolite.profile.datasheet import h100_sxm

H100 = h100_sxm()


def test_select_fields() -> None:
    s = select(4096, 4096, 4096, profile=H100)
    assert isinstance(s, Selection)
    assert s.variant == s.config.variant
    assert s.predicted_time_s > 0
    assert s.predicted_tflops == s.problem.flops / s.predicted_time_s / 1e12
    assert s.profile_fingerprint == H100.fingerprint
    assert s.profile_device == H100.device_name
    assert s.candidates[0].config == s.config
    assert s.bottleneck in ("issue", "smem", "cache", "occupancy", "compute")
    assert select(4096, 4096, 4096, profile=H100) is s  # cached


def test_explain_is_a_table_of_candidates() -> None:
    s = select(512, 14336, 4096, profile=H100)
    text = s.explain()
    assert s.config.key in text
    assert "TFLOP/s" in text and "L2" in text and "HBM" in text
    lines = [line for line in text.splitlines() if line[:3].strip().isdigit() and "/" in line[:40]]
    assert len(lines) == min(8, len(s.candidates))
    assert lines[0].split()[1] == s.config.key


def test_select_with_profile_path(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from theodolite.profile import save_profile

    path = save_profile(H100, tmp_path / "h100.h5")
    s = select(1024, 1024, 1024, profile=str(path or tmp_path / "h100.h5"))
    assert s.profile_device == H100.device_name


def test_select_cli_shape(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from theodolite.profile import save_profile

    path = tmp_path / "h100.h5"
    save_profile(H100, path)
    out = subprocess.run(
        [sys.executable, "-m", "theodolite", "select", "4096", "4096", "4096", "--profile", str(path), "--explain"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "pick:" in out and "TFLOP/s" in out
    out = subprocess.run(
        [sys.executable, "-m", "theodolite", "select", "--profile", str(path), "--no-run"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "pred TFLOP/s" in out and "bound" in out


def test_select_cli_bad_shape() -> None:
    result = subprocess.run([sys.executable, "-m", "theodolite", "select", "1", "2"], capture_output=True, text=True)
    assert result.returncode == 2
    assert "three integers" in result.stderr


def test_matmul_selects_once_and_launches_the_pick(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import torch

    from theodolite import api, kernels

    calls = []

    def fake_gemm(a, b, config, **kwargs):  # type: ignore[no-untyped-def]
        calls.append((config, kwargs))
        return torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype)

    monkeypatch.setattr(kernels, "gemm", fake_gemm, raising=False)
    api.clear_caches()
    a = torch.randn(256, 128, dtype=torch.bfloat16)
    b = torch.randn(128, 512, dtype=torch.bfloat16)
    out = api.matmul(a, b, profile=H100)
    api.matmul(a, b, profile=H100)
    assert out.shape == (256, 512)
    assert len(calls) == 2 and calls[0][0] == calls[1][0]
    assert calls[0][1]["num_sms"] == int(H100.value("sm_count"))
    assert calls[0][0] == select(256, 512, 128, profile=H100).config
