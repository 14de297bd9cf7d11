"""Streaming kernels shared by the L2 and HBM probes: read (``.cg``, L1 bypassed), write, copy."""

from __future__ import annotations

import triton
import triton.language as tl
from theodolite.probes.common import cuda_time


@triton.jit
def read_kernel(x_ptr, out_ptr, n_per_prog, REPS, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    base = x_ptr + pid.to(tl.int64) * n_per_prog
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for _ in range(REPS):
        for start in range(0, n_per_prog, BLOCK):
            acc += tl.load(base + start + offs, cache_modifier=".cg")
    tl.store(out_ptr + pid * BLOCK + offs, acc)


@triton.jit
def write_kernel(x_ptr, n_per_prog, value, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    base = x_ptr + pid.to(tl.int64) * n_per_prog
    v = tl.zeros([BLOCK], dtype=tl.float32) + value
    for start in range(0, n_per_prog, BLOCK):
        tl.store(base + start + offs, v)


@triton.jit
def copy_kernel(src_ptr, dst_ptr, n_per_prog, BLOCK: tl.constexpr, INTERLEAVED: tl.constexpr = False):
    """Chunked: each program copies its own contiguous slice.  Interleaved: step i of program p
    copies block i * programs + p, so concurrent programs touch neighbouring blocks (DRAM pages)."""
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    offs = tl.arange(0, BLOCK)
    start_offset = pid.to(tl.int64) * n_per_prog
    for start in range(0, n_per_prog, BLOCK):
        if INTERLEAVED:  # noqa: SIM108 (a constexpr branch, resolved at compile time)
            base = (programs.to(tl.int64) * (start // BLOCK) + pid) * BLOCK
        else:
            base = start_offset + start
        x = tl.load(src_ptr + base + offs, cache_modifier=".cg")
        tl.store(dst_ptr + base + offs, x)


class Streamer:
    """Reads/writes/copies over float32 buffers with ``programs`` programs of ``BLOCK`` elements a step."""

    def __init__(self, device: str, programs: int, block: int = 4096, warps: int = 8):
        import torch

        self.device = device
        self.programs = programs
        self.block = block
        self.warps = warps
        self.out = torch.empty(programs * block, dtype=torch.float32, device=device)

    def per_prog(self, nbytes: int) -> int:
        return max(self.block, (nbytes // 4 // self.programs) // self.block * self.block)

    def read_seconds(self, x, nbytes: int, reps: int = 1, launches: int = 2) -> tuple[float, float]:
        """(seconds per launch, bytes read per launch)."""
        n = self.per_prog(nbytes)
        seconds = cuda_time(
            lambda: read_kernel[(self.programs,)](x, self.out, n, reps, BLOCK=self.block, num_warps=self.warps),
            launches=launches,
        )
        return seconds, 4.0 * n * self.programs * reps

    def write_seconds(self, x, nbytes: int, launches: int = 2) -> tuple[float, float]:
        n = self.per_prog(nbytes)
        seconds = cuda_time(
            lambda: write_kernel[(self.programs,)](x, n, 1.5, BLOCK=self.block, num_warps=self.warps),
            launches=launches,
        )
        return seconds, 4.0 * n * self.programs

    def copy_seconds(self, src, dst, nbytes: int, launches: int = 2, interleaved: bool = False) -> tuple[float, float]:
        n = self.per_prog(nbytes)
        seconds = cuda_time(
            lambda: copy_kernel[(self.programs,)](
                src, dst, n, BLOCK=self.block, INTERLEAVED=interleaved, num_warps=self.warps
            ),
            launches=launches,
        )
        return seconds, 8.0 * n * self.programs
