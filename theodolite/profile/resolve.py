"""Finding the profile for a device.

Order: an explicit path, then ``$THEODOLITE_PROFILE``, then the user cache
(``$XDG_CACHE_HOME/theodolite/profiles`` or ``~/.cache/theodolite/profiles``),
then the profiles bundled with the package.  In the cache and the bundle the
profile is matched on the device name; with no device (a CPU-only machine)
the bundled default is used.  A profile of another device than the one
present warns once, naming both.
"""

from __future__ import annotations

import functools
import os
import re
import warnings
from importlib import resources
from pathlib import Path

from theodolite.errors import ProfileError
from theodolite.profile.hdf5 import load_profile
from theodolite.profile.schema import Profile

ENV_VARIABLE = "THEODOLITE_PROFILE"
DEFAULT_BUNDLED = "nvidia-h100-80gb-hbm3.h5"

_warned: set[tuple[str, str]] = set()


class ProfileMismatchWarning(UserWarning):
    """The profile in use was measured on another device than the one present."""


def slug(device_name: str) -> str:
    """File-name form of a device name: 'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3'."""
    return re.sub(r"[^a-z0-9]+", "-", device_name.lower()).strip("-")


def user_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "theodolite" / "profiles"


def bundled_dir() -> Path:
    return Path(str(resources.files("theodolite.profiles")))


def bundled_profiles() -> list[Path]:
    return sorted(bundled_dir().glob("*.h5"))


def current_device_name() -> str | None:
    """Name of the GPU torch sees, or None on a machine without one."""
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        return None
    if not torch.cuda.is_available():
        return None
    return str(torch.cuda.get_device_name(torch.cuda.current_device()))


def _find_in(folder: Path, device_name: str) -> Path | None:
    wanted = slug(device_name)
    candidates = sorted(folder.glob("*.h5")) if folder.is_dir() else []
    for candidate in candidates:
        if candidate.stem == wanted:
            return candidate
    for candidate in candidates:  # a file named otherwise, but measured on this device
        try:
            if slug(load_cached(str(candidate)).device_name) == wanted:
                return candidate
        except ProfileError:
            continue
    return None


def resolve_profile_path(path: str | os.PathLike[str] | None = None, device_name: str | None = None) -> Path:
    """The file that ``load`` would read, by the documented order."""
    if path is not None:
        return Path(path)
    from_env = os.environ.get(ENV_VARIABLE)
    if from_env:
        return Path(from_env)
    device = device_name if device_name is not None else current_device_name()
    if device:
        for folder in (user_cache_dir(), bundled_dir()):
            found = _find_in(folder, device)
            if found is not None:
                return found
        if not bundled_profiles():
            raise ProfileError(f"no profile for {device!r} and none bundled; run `theodolite calibrate`")
    default = bundled_dir() / DEFAULT_BUNDLED
    if default.is_file():
        return default
    profiles = bundled_profiles()
    if not profiles:
        raise ProfileError("no bundled profile found; the installation is incomplete")
    return profiles[0]


@functools.lru_cache(maxsize=32)
def load_cached(path: str) -> Profile:
    return load_profile(path)


def load(path: str | os.PathLike[str] | None = None, device_name: str | None = None) -> Profile:
    """Load the profile for the present device (or the given path), once per file per process."""
    resolved = resolve_profile_path(path, device_name)
    profile = load_cached(str(resolved.resolve()))
    present = device_name if device_name is not None else current_device_name()
    if present and slug(present) != slug(profile.device_name):
        key = (present, profile.device_name)
        if key not in _warned:
            _warned.add(key)
            warnings.warn(
                f"using the profile of {profile.device_name!r} ({resolved}) on a {present!r}: "
                f"run `theodolite calibrate` for this device",
                ProfileMismatchWarning,
                stacklevel=2,
            )
    return profile
