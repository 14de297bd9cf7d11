"""Occupancy and wave quantization.

Two numbers per config: how many programs per SM the launch *asks* for (the kernels' own
``programs_per_sm``, which sets the persistent grid) and how many actually *fit* at once
(shared memory, registers of the real build, threads).  Work then runs in waves of the
programs that fit; the last wave keeps only part of the SMs busy.
"""

from __future__ import annotations

import numpy as np
from theodolite.kernels.config import GemmConfig, KernelLimits, estimated_registers, programs_per_sm, smem_bytes

from theodolite.profile.schema import KernelBuild

# Shared memory the driver reserves per resident block (CUDA: 1 KiB); the kernels' own
# programs_per_sm uses the same figure, so the grid and this fit agree.
SMEM_RESERVED_PER_BLOCK = 1024


def launched_per_sm(config: GemmConfig, dtype: str, limits: KernelLimits) -> int:
    """Programs per SM in the grid of a persistent variant (exactly what gemm() launches)."""
    return programs_per_sm(config, dtype, limits)


def resident_per_sm(config: GemmConfig, dtype: str, limits: KernelLimits, build: KernelBuild | None) -> int:
    """Programs of this config that can be resident on one SM at once (0: cannot launch)."""
    threads = config.num_warps * limits.warp_size
    shared = build.shared_bytes if build is not None else smem_bytes(config, dtype)
    regs = build.n_regs if build is not None and build.n_regs > 0 else estimated_registers(config, limits.warp_size)
    smem_sm = limits.smem_bytes_per_sm or limits.smem_bytes_per_block
    # a block that fits the per-block limit always gets an SM to itself (no reservation then)
    by_smem = max(int(shared <= limits.smem_bytes_per_block), smem_sm // (shared + SMEM_RESERVED_PER_BLOCK))
    by_threads = limits.max_threads_per_sm // threads
    by_regs = limits.regs_per_sm // (threads * max(1, regs))
    return int(max(0, min(by_smem, by_threads, by_regs)))


def waves(items: int, slots: int) -> tuple[int, int]:
    """(full waves, items in the last partial wave) when ``slots`` items run at once."""
    if slots <= 0:
        raise ValueError("slots must be positive")
    return items // slots, items % slots


def last_wave_busy_fraction(items: int, slots: int) -> float:
    """Fraction of the slots busy in the last wave (1.0 when the work divides evenly)."""
    full, rest = waves(items, slots)
    if rest == 0:
        return 1.0
    return rest / slots


def wave_arrays(items: np.ndarray, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised ``waves``: full waves and the size of the last partial wave."""
    full = items // slots
    return full, items - full * slots


def sm_busy_fraction(items: np.ndarray, concurrent: np.ndarray, sm_count: int) -> np.ndarray:
    """Average fraction of SMs doing work over all waves (1 = every SM busy in every wave)."""
    full, rest = wave_arrays(items, np.maximum(concurrent, 1))
    active_full = np.minimum(concurrent, sm_count)
    active_last = np.minimum(rest, sm_count)
    n_waves = full + (rest > 0)
    return (full * active_full + active_last) / np.maximum(n_waves * sm_count, 1)
