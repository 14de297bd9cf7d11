"""Shared pieces of the probes: special-register reads in Triton and GPU timing helpers."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import triton
import triton.language as tl

from theodolite.profile.schema import Curve, Measurement


@triton.jit
def smid(like):
    """%smid of the SM running this program, one value per element of ``like`` (an int32 tensor)."""
    return tl.inline_asm_elementwise("mov.u32 $0, %smid; // $1", "=r,r", [like], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def clock64(like):
    """%clock64 (SM cycles), read once per element of ``like`` (an int64 tensor)."""
    return tl.inline_asm_elementwise(
        "mov.u64 $0, %clock64; // $1", "=l,l", [like], dtype=tl.int64, is_pure=False, pack=1
    )


@triton.jit
def globaltimer(like):
    """%globaltimer (ns), read once per element of ``like`` (an int64 tensor)."""
    return tl.inline_asm_elementwise(
        "mov.u64 $0, %globaltimer; // $1", "=l,l", [like], dtype=tl.int64, is_pure=False, pack=1
    )


def cuda_time(fn: Callable[[], Any], *, launches: int = 1, warmup: int = 1) -> float:
    """Seconds per call of ``fn``: ``launches`` calls between two CUDA events (after ``warmup`` calls)."""
    import torch

    for _ in range(warmup):
        fn()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(launches):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e-3 / launches


def wall_time(fn: Callable[[], Any]) -> float:
    """Wall seconds of one call followed by a synchronize."""
    import torch

    torch.cuda.synchronize()
    begin = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return time.perf_counter() - begin


@dataclass
class ProbeResult:
    """What one probe hands back to the runner."""

    metrics: dict[str, Measurement] = field(default_factory=dict)
    curves: dict[str, Curve] = field(default_factory=dict)
    unsupported: dict[str, str] = field(default_factory=dict)
    references: dict[str, float] = field(default_factory=dict)  # independent figures (torch) for the checks
    diagnostics: dict[str, Any] = field(default_factory=dict)

    def merge(self, other: ProbeResult) -> None:
        self.metrics.update(other.metrics)
        self.curves.update(other.curves)
        self.unsupported.update(other.unsupported)
        self.references.update(other.references)
        self.diagnostics.update(other.diagnostics)


@dataclass
class ProbeContext:
    """The device and the choices every probe shares (quick mode, repeats, the clock measured so far)."""

    device: int = 0
    quick: bool = False
    repeats: int = 5
    retries: int = 2
    cv_threshold: float = 0.03
    sm_count: int = 0
    l2_bytes: int = 0
    capability: tuple[int, int] = (0, 0)
    clock_max_hz: float = 0.0
    clock_sustained_hz: float = 0.0
    # the card's peak clock as first measured, cold: a re-run of the clock probe (spread guard) reuses it
    cold_clock_max: Measurement | None = None
    log: Callable[[str], None] = print
