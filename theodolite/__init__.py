"""theodolite: measure a GPU once, then pick fast GEMM configs from the measurement.

Public API: ``select`` (model pick for a problem), ``matmul`` (select and run),
``load_profile`` / ``Profile`` (hardware profiles); in PyTorch models ``nn.Linear`` and ``patch``/``unpatch``
(swap a model's Linear layers in place), on the operators of ``ops`` (``torch.ops.theodolite.linear``/``mm``).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from theodolite.errors import NoDeviceError, ProfileError, TheodoliteError
from theodolite.profile import Profile, load_profile

__version__ = "0.1.0"

# In a source checkout that is not installed (or installed into another interpreter: on our GPU image
# `pip` and `python` belong to different environments), theodolite.probes/model/kernels/profiles/reports are the
# sibling folders of this package: let the import system find them there.  An install maps them itself.
_CHECKOUT = Path(__file__).resolve().parent.parent
if (_CHECKOUT / "pyproject.toml").is_file() and (_CHECKOUT / "kernels" / "config.py").is_file():
    __path__.append(str(_CHECKOUT))  # type: ignore[name-defined]  # noqa: F821

__all__ = [
    "NoDeviceError",
    "Profile",
    "ProfileError",
    "TheodoliteError",
    "__version__",
    "load_profile",
    "matmul",
    "nn",
    "ops",
    "patch",
    "select",
    "unpatch",
]


def __getattr__(name: str) -> Any:
    # select/matmul pull in the model and kernels (and torch/triton): import them on first use only.
    if name in ("select", "matmul", "Selection"):
        from theodolite import api

        return getattr(api, name)
    if name in ("nn", "ops"):  # torch-facing modules: torch is imported on first use only
        return importlib.import_module(f"theodolite.{name}")
    if name in ("patch", "unpatch"):
        from theodolite import nn

        return getattr(nn, name)
    raise AttributeError(f"module 'theodolite' has no attribute {name!r}")
