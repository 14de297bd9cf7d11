"""The aligned copy of a misaligned operand: its rows into a buffer whose rows start on 128-byte boundaries.

``gemm()`` copies an operand whose rows are not 16-byte aligned when the GEMM reuses it enough
(``config.needs_aligned_copy``).  torch's ``copy_`` into the padded view walked the elements through an offset
calculator; this tile copy reads each source row as wide as its alignment allows and writes 16-byte vectors:
the copies alone 1.53x faster, the copied GEMMs 1.20x (geomean over 57 random-dev shapes, H100;
experiments' ``copy_kernel.py``).  It moves raw bits (an integer view of the element size), so every dtype,
fp8 included, is copied exactly.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

# elements per program (a BLOCK_R x BLOCK_C tile): the experiment's 32 x 128 bf16 tiles
TILE_ELEMENTS = 4096
# sizes and strides are not specialized (one binary per vector width and block, whatever the shape): the constexprs
# carry what the loads and stores need, as the GEMM kernels' do
_RUNTIME_INTS = ("outer", "inner", "stored", "src_b", "src_r", "dst_b", "dst_r", "col_blocks", "tiles_per_batch")


@triton.jit(do_not_specialize=_RUNTIME_INTS)
def padded_copy_kernel(
    src,
    dst,
    outer,
    inner,
    stored,
    src_b,
    src_r,
    dst_b,
    dst_r,
    col_blocks,
    tiles_per_batch,
    VEC: tl.constexpr,
    DST_VEC: tl.constexpr,
    BLOCK_R: tl.constexpr,
    BLOCK_C: tl.constexpr,
):
    """One BLOCK_R x BLOCK_C tile of [batch, outer, inner] into the destination's rows, ``stored`` columns of them
    (``inner`` rounded up to DST_VEC: zeros past ``inner``; the rest of the pad was zeroed when the buffer was made).
    ``VEC`` divides the source's strides, base and ``inner``; ``DST_VEC`` the destination's strides and ``stored``.
    One grid dimension numbers every tile (the second and third stop at 65535 blocks: a few million rows)."""
    pid = tl.program_id(0)
    bid = pid // tiles_per_batch
    pid_r = (pid % tiles_per_batch) // col_blocks
    pid_c = pid % col_blocks
    src_r = (src_r // VEC) * VEC  # (x // v) * v: divisibility the compiler can see
    src_b = (src_b // VEC) * VEC
    inner = (inner // VEC) * VEC
    dst_r = (dst_r // DST_VEC) * DST_VEC
    dst_b = (dst_b // DST_VEC) * DST_VEC
    stored = (stored // DST_VEC) * DST_VEC
    r = pid_r * BLOCK_R + tl.arange(0, BLOCK_R)
    c = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    rows = (r < outer)[:, None]
    r64 = r.to(tl.int64)[:, None]
    x = tl.load(
        src + tl.cast(bid, tl.int64) * src_b + r64 * src_r + c[None, :], mask=rows & (c[None, :] < inner), other=0
    )
    tl.store(dst + tl.cast(bid, tl.int64) * dst_b + r64 * dst_r + c[None, :], x, mask=rows & (c[None, :] < stored))


_BITS = {1: "int8", 2: "int16", 4: "int32"}


def copy_arguments(
    src: torch.Tensor, buf: torch.Tensor
) -> tuple[tuple[int, int, int], tuple[Any, ...], dict[str, int]]:
    """(grid, positional arguments, constexprs) of the copy of ``src`` ([batch, outer, inner], inner contiguous) into
    ``buf`` ([batch, outer, padded], 16-byte aligned rows): both as integer views of their element size."""
    size = src.element_size()
    bits = getattr(torch, _BITS[size])
    batch, outer, inner = src.shape
    dst_vec = 16 // size
    stored = -(-inner // dst_vec) * dst_vec
    lowest = src.data_ptr() // size | src.stride(1) | (src.stride(0) if batch > 1 else 0) | inner
    vec = min(dst_vec, lowest & -lowest)
    block_c = min(128, triton.next_power_of_2(stored))
    block_r = TILE_ELEMENTS // block_c
    col_blocks = triton.cdiv(stored, block_c)
    tiles = col_blocks * triton.cdiv(outer, block_r)
    grid = (tiles * batch, 1, 1)
    args = (src.view(bits), buf.view(bits), outer, inner, stored, src.stride(0), src.stride(1), buf.stride(0),
            buf.stride(1), col_blocks, tiles)  # fmt: skip
    return grid, args, {"VEC": vec, "DST_VEC": dst_vec, "BLOCK_R": block_r, "BLOCK_C": block_c, "num_warps": 4}
