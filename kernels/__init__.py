"""theodolite.kernels: the bundled Triton GEMM kernels and their config space.

``config`` is pure Python (no torch/Triton); ``gemm``/``problem_of``/``plan_gemm`` load the
Triton kernels lazily on first use, so ``import theodolite.kernels`` stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from theodolite.kernels.config import (
    DTYPE_BYTES,
    VARIANTS,
    ConfigError,
    GemmConfig,
    KernelLimits,
    Problem,
    config_space,
    legal_configs,
    legality,
    needs_aligned_copy,
    programs_per_sm,
)

if TYPE_CHECKING:
    from theodolite.kernels.launch import (
        GemmPlan,
        KernelLaunchError,
        device_limits,
        gemm,
        is_launch_failure,
        plan_gemm,
        problem_of,
    )

_LAZY = {"gemm", "problem_of", "plan_gemm", "GemmPlan", "device_limits", "KernelLaunchError", "is_launch_failure"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from theodolite.kernels import launch

        return getattr(launch, name)
    raise AttributeError(f"module 'theodolite.kernels' has no attribute {name!r}")


__all__ = [
    "DTYPE_BYTES",
    "VARIANTS",
    "ConfigError",
    "GemmConfig",
    "GemmPlan",
    "KernelLaunchError",
    "KernelLimits",
    "Problem",
    "config_space",
    "device_limits",
    "gemm",
    "is_launch_failure",
    "legal_configs",
    "legality",
    "needs_aligned_copy",
    "plan_gemm",
    "problem_of",
    "programs_per_sm",
]
