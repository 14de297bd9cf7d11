from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from theodolite.errors import ProfileError
from theodolite.profile import resolve as resolve_module
from theodolite.profile import save_profile
from theodolite.profile.datasheet import h100_sxm, mi300x
from theodolite.profile.resolve import ProfileMismatchWarning, load, resolve_profile_path, slug


@pytest.fixture(autouse=True)
def isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.delenv("THEODOLITE_PROFILE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(resolve_module, "current_device_name", lambda: None)
    resolve_module.load_cached.cache_clear()
    resolve_module._warned.clear()
    return tmp_path


def test_slug() -> None:
    assert slug("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3"
    assert slug("AMD Instinct MI300X") == "amd-instinct-mi300x"


def test_explicit_path_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    explicit = save_profile(mi300x(), tmp_path / "explicit.h5")
    monkeypatch.setenv("THEODOLITE_PROFILE", str(tmp_path / "env.h5"))
    assert resolve_profile_path(explicit, device_name="NVIDIA H100 80GB HBM3") == explicit


def test_environment_before_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = save_profile(mi300x(), tmp_path / "env.h5")
    cache = resolve_module.user_cache_dir()
    save_profile(h100_sxm(), cache / "nvidia-h100-80gb-hbm3.h5")
    monkeypatch.setenv("THEODOLITE_PROFILE", str(env))
    assert resolve_profile_path(device_name="NVIDIA H100 80GB HBM3") == env


def test_cache_before_bundle_matched_on_device_name() -> None:
    cache = resolve_module.user_cache_dir()
    cached = save_profile(h100_sxm(), cache / "my-card.h5")  # found by the name inside, not the file name
    assert resolve_profile_path(device_name="NVIDIA H100 80GB HBM3") == cached


def test_bundle_matched_on_device_name() -> None:
    found = resolve_profile_path(device_name="AMD Instinct MI300X")
    assert found.name == "amd-instinct-mi300x.h5" and found.parent == resolve_module.bundled_dir()


def test_no_device_uses_bundled_default() -> None:
    found = resolve_profile_path()
    assert found.parent == resolve_module.bundled_dir()


def test_other_device_warns_once_naming_both(tmp_path: Path) -> None:
    path = save_profile(mi300x(), tmp_path / "p.h5")
    with pytest.warns(ProfileMismatchWarning, match="MI300X.*H100"):
        load(path, device_name="NVIDIA H100 80GB HBM3")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load(path, device_name="NVIDIA H100 80GB HBM3")


def test_bad_env_path_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("THEODOLITE_PROFILE", str(tmp_path / "missing.h5"))
    with pytest.raises(ProfileError, match="missing.h5"):
        load()
