"""Compute and on-chip costs of one K-iteration of one program (per config, shape-independent).

Matrix work runs at the profile's per-SM matrix rate for the dtype; a tile narrower than
the matrix instruction pads up to it.  Shared memory carries every operand byte twice (the
copy in and the read by the matrix unit); pointer-based loads cost issue slots that TMA
loads do not.
"""

from __future__ import annotations

import numpy as np
from theodolite.model.hardware import Hardware

VECTOR_BYTES = 16  # bytes of one vector load of an aligned row (the kernels' ALIGN_BYTES)


def flops_per_iteration(bm: np.ndarray, bn: np.ndarray, bk: np.ndarray) -> np.ndarray:
    return 2.0 * bm * bn * bk


def mma_instructions(bm: np.ndarray, bn: np.ndarray, bk: np.ndarray, warps: np.ndarray, hw: Hardware) -> np.ndarray:
    """Matrix instructions one program issues per K-iteration (the tile's decomposition).

    Asynchronous path (block_m >= mma_min_m): warpgroups of 4 warps split M first (down to
    mma_min_m rows each), then N; each issues (rows / mma_min_m) x (K / k_step) instructions of
    N = min(its columns, mma_max_n).  Synchronous path: 16 x 8 x k_step instructions, the warps
    (one per scheduler, up to 4) issuing in parallel.
    k_step: 32 bytes of the input (16 bf16 elements).
    """
    k_step = 32.0 / hw.element_bytes
    sync_k_step = 32.0 / (hw.sync_element_bytes or hw.element_bytes)  # converted operands: the wider type's step
    groups = np.maximum(warps / 4.0, 1.0)
    groups_m = np.minimum(groups, np.maximum(bm / hw.mma_min_m, 1.0))
    groups_n = groups / groups_m
    cols = bn / groups_n
    asynchronous = (bm / hw.mma_min_m) * (bk / k_step) * np.ceil(cols / hw.mma_max_n) * groups_n
    synchronous = (bm / 16.0) * (bn / 8.0) * (bk / sync_k_step) / np.minimum(warps, 4.0)  # one scheduler per warp
    return np.where(bm < hw.mma_min_m, synchronous, asynchronous)


def compute_time(bm: np.ndarray, bn: np.ndarray, bk: np.ndarray, hw: Hardware, warps: np.ndarray) -> np.ndarray:
    """Seconds of matrix-unit work per K-iteration of one program, alone on its SM.

    FLOPs at the profile's per-SM matrix rate (tiles narrower than the asynchronous instruction's
    M run on the synchronous path at ``mma_small_rate`` of it), plus a fixed cost per instruction.  Where the
    compiler converts the synchronous path's operands (fp8 as fp16: ``hw.sync_flops_per_sm``), it runs at the wider
    type's rate and issues one conversion per two elements of every fragment a warp reads (``conversion_time``).
    """
    sync = hw.mma_small_rate * (hw.sync_flops_per_sm or hw.mma_flops_per_sm)
    rate = np.where(bm < hw.mma_min_m, sync, hw.mma_flops_per_sm)
    matrix = flops_per_iteration(bm, bn, bk) / rate + mma_instructions(bm, bn, bk, warps, hw) * hw.mma_instruction_s
    return matrix + conversion_time(bm, bn, bk, warps, hw)


def conversion_time(bm: np.ndarray, bn: np.ndarray, bk: np.ndarray, warps: np.ndarray, hw: Hardware) -> np.ndarray:
    """Seconds per K-iteration of the synchronous path's operand conversions (0 where the compiler converts none):
    each warp unpacks its A and B fragments (``sync_warp_grid``), two elements per instruction per thread."""
    if not hw.sync_element_bytes:
        return np.zeros(np.shape(bm))
    wm, wn = sync_warp_grid(bm, bn, warps)
    instructions = (bm * bk * wn + bn * bk * wm) / (2.0 * hw.warp_size)
    return np.where(bm < hw.mma_min_m, instructions / hw.issue_rate, 0.0)


def sync_warp_grid(bm: np.ndarray, bn: np.ndarray, warps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(warps along M, warps along N) of the synchronous path's accumulator (Triton 3.6's mma v2 layout).

    Warps double along M while the tile has at least as many 16-row instruction blocks per warp there as
    8-column blocks along N (and M is not yet one block per warp), else along N: 16x64 and 32x64 tiles with
    4 warps get 1 x 4 (checked against the compiled layouts, ``nvidia_mma<... warpsPerCTA>``)."""
    wm = np.ones_like(bm, dtype=float)
    wn = np.ones_like(bm, dtype=float)
    for _ in range(5):  # up to 32 warps
        more = wm * wn < warps
        along_m = (bm / 16.0 / wm >= bn / 8.0 / wn) & (wm < bm / 16.0)
        wm = np.where(more & along_m, wm * 2.0, wm)
        wn = np.where(more & ~along_m, wn * 2.0, wn)
    return wm, wn


def smem_time(bm: np.ndarray, bn: np.ndarray, bk: np.ndarray, warps: np.ndarray, hw: Hardware) -> np.ndarray:
    """Seconds of shared-memory traffic per K-iteration: the operands written once, then read by the
    matrix instructions.  Asynchronous path: A once per mma_max_n columns, B once per mma_min_m rows.
    Synchronous path: each warp loads its operand fragments to registers itself, so A is read once per
    warp along N and B once per warp along M (a 16x64x128 tile with 4 warps reads A four times: measured,
    its K-step costs what 52 KB of shared memory traffic does, experiments/tile_steps.py)."""
    e = hw.element_bytes
    written = (bm + bn) * bk * e
    wm, wn = sync_warp_grid(bm, bn, warps)
    asynchronous = bm * bk * e * np.ceil(bn / hw.mma_max_n) + bn * bk * e * np.maximum(bm / hw.mma_min_m, 1.0)
    synchronous = bm * bk * e * wn + bn * bk * e * wm
    read = np.where(bm < hw.mma_min_m, synchronous, asynchronous)
    return (written + read) / hw.smem_bandwidth


def part_rereads(bm: np.ndarray, bn1: np.ndarray, bk: np.ndarray, hw: Hardware) -> np.ndarray:
    """Seconds of shared-memory traffic per K-iteration that a composite tile's second dot adds: it reads the A
    tile once more (``smem_time`` of the whole tile counts one read per ``mma_max_n`` columns); 0 where bn1 is 0.

    For 128 x (256 + 64) that is one read more than its two dots make (two, as a 320-wide tile's count already has):
    kept, since the model still prices that tile ~17% too fast against 128 x 256 (H100 sweeps, median over shapes), and
    the exact count made the fast path pick it 11% over the argmin on 11889x543x2896 (tests/model/test_model_fast)."""
    return np.where(bn1 > 0, bm * bk * hw.element_bytes / hw.smem_bandwidth, 0.0)


def issue_time(
    bm: np.ndarray, bn: np.ndarray, bk: np.ndarray, tma: np.ndarray, hw: Hardware, a_vector: int, b_vector: int
) -> np.ndarray:
    """Seconds of load-issue per K-iteration for pointer-based loads (TMA: one descriptor copy, ~free).

    ``a_vector``/``b_vector``: bytes per load instruction per thread (16 when rows are aligned,
    the element size when not).
    """
    e = hw.element_bytes
    loads = (bm * bk * e / a_vector + bn * bk * e / b_vector) / hw.warp_size
    return np.where(tma, 0.0, loads * hw.load_instructions / hw.issue_rate)


def _copy_coefficients(
    bm: np.ndarray, bn: np.ndarray, bk: np.ndarray, tma: np.ndarray, hw: Hardware, per_copy_s: float
) -> tuple[np.ndarray, np.ndarray]:
    """(ca, cb): a K-step's warp-wide copies of A's and B's tiles times ``per_copy_s`` each is ca / a_vector and
    cb / b_vector (bytes a thread copies); none for TMA kernels (one descriptor copy)."""
    scale = np.where(tma, 0.0, hw.element_bytes * per_copy_s / hw.warp_size)
    return bm * bk * scale, bn * bk * scale


def narrow_coefficients(
    bm: np.ndarray, bn: np.ndarray, bk: np.ndarray, tma: np.ndarray, hw: Hardware
) -> tuple[np.ndarray, np.ndarray]:
    """(na, nb) with a narrow operand's extra seconds per iteration = na / a_vector (or nb / b_vector): its warp-wide
    copies at ``model_narrow_copy_cycles`` each (core.per_program charges them only for copies of 4 and 8 bytes;
    TMA kernels need 16-byte rows)."""
    return _copy_coefficients(bm, bn, bk, tma, hw, hw.narrow_copy_s)


def issue_coefficients(
    bm: np.ndarray, bn: np.ndarray, bk: np.ndarray, tma: np.ndarray, hw: Hardware
) -> tuple[np.ndarray, np.ndarray]:
    """(ca, cb) with issue seconds per iteration = ca / a_vector + cb / b_vector (bytes per load)."""
    return _copy_coefficients(bm, bn, bk, tma, hw, hw.load_instructions / hw.issue_rate)
