"""Streaming kernels of the L2 and HBM probes: read (``.cg``, L1 bypassed), write and copy.

Persistent kernels (a fixed share per program) and one-block-per-program ("flat") ones.
"""

from __future__ import annotations

from dataclasses import dataclass

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


# --- one block per program ("flat"): the hardware block scheduler balances the work -------------
# The persistent kernels above give every program a fixed share, so a grid that is not exactly one
# resident wave (registers decide how many programs fit per SM) ends in a partly idle tail, and the
# programs' streams drift apart over the buffer.  The flat kernels launch one program per block of
# BLOCK elements (as torch's elementwise copy does), so the grid front moves through the buffer
# together and there is no tail beyond the last partial wave of tiny programs.  Hints are constexpr
# strings: LOAD_CM (".cg" bypasses L1), EVICT ("evict_first" marks lines as streaming in L2),
# STORE_CM (".cs" streaming store).


@triton.jit
def flat_read_kernel(
    x_ptr,
    out_ptr,
    n,
    BLOCK: tl.constexpr,
    EVEN: tl.constexpr,
    LOAD_CM: tl.constexpr = ".cg",
    EVICT: tl.constexpr = "",
):
    """Reads its block; stores only where a value equals -1 (never, for data in [0, 1)), so the
    loads cannot be removed and the store moves no bytes."""
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        x = tl.load(x_ptr + offs, cache_modifier=LOAD_CM, eviction_policy=EVICT)
    else:
        x = tl.load(x_ptr + offs, mask=offs < n, other=0.0, cache_modifier=LOAD_CM, eviction_policy=EVICT)
    tl.store(out_ptr + tl.arange(0, BLOCK), x, mask=x == -1.0)


@triton.jit
def flat_write_kernel(
    x_ptr, n, value, BLOCK: tl.constexpr, EVEN: tl.constexpr, STORE_CM: tl.constexpr = "", EVICT: tl.constexpr = ""
):
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    v = tl.zeros([BLOCK], dtype=tl.float32) + value
    if EVEN:
        tl.store(x_ptr + offs, v, cache_modifier=STORE_CM, eviction_policy=EVICT)
    else:
        tl.store(x_ptr + offs, v, mask=offs < n, cache_modifier=STORE_CM, eviction_policy=EVICT)


@triton.jit
def flat_copy_kernel(
    src_ptr,
    dst_ptr,
    n,
    BLOCK: tl.constexpr,
    EVEN: tl.constexpr,
    LOAD_CM: tl.constexpr = ".cg",
    EVICT: tl.constexpr = "",
    STORE_CM: tl.constexpr = "",
):
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        x = tl.load(src_ptr + offs, cache_modifier=LOAD_CM, eviction_policy=EVICT)
        tl.store(dst_ptr + offs, x, cache_modifier=STORE_CM, eviction_policy=EVICT)
    else:
        mask = offs < n
        x = tl.load(src_ptr + offs, mask=mask, other=0.0, cache_modifier=LOAD_CM, eviction_policy=EVICT)
        tl.store(dst_ptr + offs, x, mask=mask, cache_modifier=STORE_CM, eviction_policy=EVICT)


@dataclass(frozen=True)
class StreamVariant:
    """One way to stream a buffer: the persistent kernels (``flat=False``, ``per_sm`` programs per
    SM) or one block per program (``flat=True``), with its cache hints."""

    flat: bool = True
    block: int = 4096
    warps: int = 4
    per_sm: int = 8  # persistent only
    interleaved: bool = False  # persistent copy only
    load_cm: str = ".cg"
    evict: str = ""
    store_cm: str = ""

    @property
    def key(self) -> str:
        if not self.flat:
            layout = "/interleaved" if self.interleaved else ""
            return f"persistent/{self.per_sm}perSM/b{self.block}/w{self.warps}{layout}"
        hints = (f"/ld{self.load_cm}" if self.load_cm else "") + (f"/{self.evict}" if self.evict else "")
        hints += f"/st{self.store_cm}" if self.store_cm else ""
        return f"flat/b{self.block}/w{self.warps}{hints}"


def stream_bytes(variant: StreamVariant, nbytes: int, sm_count: int) -> int:
    """Bytes one pass of ``variant`` touches in a buffer of ``nbytes`` (float32), read or written once."""
    if variant.flat:
        return nbytes // 4 * 4
    programs = sm_count * variant.per_sm
    per_prog = max(variant.block, (nbytes // 4 // programs) // variant.block * variant.block)
    return 4 * per_prog * programs


def launch_stream(kind: str, variant: StreamVariant, sm_count: int, src, dst=None, out=None, nbytes: int = 0):
    """One launch of ``kind`` ("read", "write", "copy") over the first ``nbytes`` of ``src`` (and ``dst``).

    ``out`` is the read sink (at least ``variant.block`` floats for flat, programs x block for
    persistent).  Returns the compiled kernel (for its registers)."""
    n = nbytes // 4
    if variant.flat:
        grid = (triton.cdiv(n, variant.block),)
        even = n % variant.block == 0
        common = {"BLOCK": variant.block, "EVEN": even, "num_warps": variant.warps}
        if kind == "read":
            return flat_read_kernel[grid](src, out, n, LOAD_CM=variant.load_cm, EVICT=variant.evict, **common)
        if kind == "write":
            return flat_write_kernel[grid](src, n, 1.5, STORE_CM=variant.store_cm, EVICT=variant.evict, **common)
        return flat_copy_kernel[grid](
            src, dst, n, LOAD_CM=variant.load_cm, EVICT=variant.evict, STORE_CM=variant.store_cm, **common
        )
    programs = sm_count * variant.per_sm
    per_prog = max(variant.block, (n // programs) // variant.block * variant.block)
    if kind == "read":
        return read_kernel[(programs,)](src, out, per_prog, 1, BLOCK=variant.block, num_warps=variant.warps)
    if kind == "write":
        return write_kernel[(programs,)](src, per_prog, 1.5, BLOCK=variant.block, num_warps=variant.warps)
    return copy_kernel[(programs,)](
        src, dst, per_prog, BLOCK=variant.block, INTERLEAVED=variant.interleaved, num_warps=variant.warps
    )


def stream_rate(
    kind: str, variant: StreamVariant, sm_count: int, src, dst=None, out=None, nbytes: int = 0, launches: int = 2
) -> float:
    """Bytes per second of one timed sample (copy counts bytes read plus written)."""
    moved = stream_bytes(variant, nbytes, sm_count) * (2 if kind == "copy" else 1)
    seconds = cuda_time(lambda: launch_stream(kind, variant, sm_count, src, dst, out, nbytes), launches=launches)
    return moved / seconds


# --- GEMM-output-shaped writes ----------------------------------------------------------------------
# A GEMM's epilogue writes its output tile by tile: BLOCK_M rows of BLOCK_N elements each, the rows a whole output row
# pitch apart, the tiles in the grouped order the bundled kernels walk (GROUP_M row tiles per column sweep).  Short-K
# GEMMs with large outputs write at about half the flat write probe's rate on both GPUs (docs/model.md, known
# defects); this kernel writes the same pattern with nothing else in the program, so the store pattern's own rate is
# measured apart from the GEMM around it.


@triton.jit
def tile_write_kernel(
    out_ptr, M, N, stride_m, value, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr
):
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * tiles_n
    first_m = (pid // per_group) * GROUP_M
    size_m = tl.minimum(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % size_m
    pid_n = (pid % per_group) // size_m
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    tile = (tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32) + value).to(out_ptr.dtype.element_ty)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    tl.store(out_ptr + rows[:, None].to(tl.int64) * stride_m + cols[None, :], tile, mask=mask)


@dataclass(frozen=True)
class TileWrite:
    """The tile shape, group and warps of a GEMM-output-shaped write (the bundled kernels' large TMA tile)."""

    block_m: int = 128
    block_n: int = 256
    group_m: int = 8
    warps: int = 8

    @property
    def key(self) -> str:
        return f"tiles/{self.block_m}x{self.block_n}/g{self.group_m}/w{self.warps}"


def launch_tile_write(out, variant: TileWrite, value: float = 1.5):
    """One launch writing every element of the 2-D ``out`` (unit column stride) tile by tile."""
    m, n = out.shape
    grid = (triton.cdiv(m, variant.block_m) * triton.cdiv(n, variant.block_n),)
    return tile_write_kernel[grid](
        out, m, n, out.stride(0), value,
        BLOCK_M=variant.block_m, BLOCK_N=variant.block_n, GROUP_M=variant.group_m, num_warps=variant.warps,
    )  # fmt: skip


def tile_write_rate(out, variant: TileWrite, launches: int = 2) -> float:
    """Bytes per second one tile-by-tile write of ``out`` reaches."""
    seconds = cuda_time(lambda: launch_tile_write(out, variant), launches=launches)
    return out.numel() * out.element_size() / seconds
