"""Stream-K GEMM: full waves of tiles data-parallel, the remainder's K iterations split evenly over all programs.

Determinism: a tile shared by several programs is not summed with atomics.  Each program
writes its partial tiles (at most two: its first and last segment) to an fp32 workspace
``[programs, 2, BLOCK_M, BLOCK_N]`` and a second kernel, ``streamk_fixup``, adds them in
program order and applies the epilogue.  No spin-waits, so it also runs in the interpreter.
"""

from __future__ import annotations

import triton
import triton.language as tl
from theodolite.kernels.epilogue import epilogue, load_partial, mma_tile, store_partial, tile_coords
from theodolite.kernels.persistent import RUNTIME_INTS

SK_INTS = RUNTIME_INTS + ["dp_tiles"]


@triton.jit(do_not_specialize=SK_INTS)
def streamk_kernel(
    a_ptr, b_ptr, out_ptr, c_ptr, bias_ptr, scale_ptr, ws_ptr,
    M, N, K, LM, LN, KA, KB, num_tiles,
    stride_ab, stride_a, stride_bb, stride_b,
    stride_ob, stride_om, stride_on, stride_cb, stride_cm, stride_cn,
    alpha, beta, dp_tiles,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    A_KMAJOR: tl.constexpr, B_KMAJOR: tl.constexpr, A_VEC: tl.constexpr, B_VEC: tl.constexpr,
    KA_VEC: tl.constexpr, KB_VEC: tl.constexpr,
    PRECISION: tl.constexpr, HAS_C: tl.constexpr, BIAS_MODE: tl.constexpr, HAS_SCALE: tl.constexpr,
    OUT_VEC: tl.constexpr, C_VEC: tl.constexpr, N_VEC: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    # Data-parallel full waves.
    for tile in range(pid, dp_tiles, programs):
        bid, pid_m, pid_n = tile_coords(tile, num_pid_m, num_pid_n, GROUP_M)
        acc = mma_tile(
            a_ptr, b_ptr, bid, pid_m, pid_n, 0, k_tiles, LM, LN, KA, KB,
            stride_ab, stride_a, stride_bb, stride_b,
            BLOCK_M, BLOCK_N, BLOCK_K, A_KMAJOR, B_KMAJOR, A_VEC, B_VEC, KA_VEC, KB_VEC, PRECISION,
        )  # fmt: skip
        epilogue(
            acc, out_ptr, c_ptr, bias_ptr, scale_ptr, bid, pid_m, pid_n, M, N,
            stride_ob, stride_om, stride_on, stride_cb, stride_cm, stride_cn, alpha, beta,
            BLOCK_M, BLOCK_N, HAS_C, BIAS_MODE, HAS_SCALE, OUT_VEC, C_VEC, N_VEC,
        )  # fmt: skip
    # Stream-K: this program's contiguous share of the remaining tiles' K iterations.
    sk_iters = (num_tiles - dp_tiles).to(tl.int64) * k_tiles
    base = dp_tiles.to(tl.int64) * k_tiles
    start = base + pid * sk_iters // programs
    end = base + (pid + 1) * sk_iters // programs
    it = start
    while it < end:
        tile = (it // k_tiles).to(tl.int32)
        k_lo = (it - tile.to(tl.int64) * k_tiles).to(tl.int32)
        seg_end = tl.minimum(end, (tile + 1).to(tl.int64) * k_tiles)
        k_hi = (seg_end - tile.to(tl.int64) * k_tiles).to(tl.int32)
        bid, pid_m, pid_n = tile_coords(tile, num_pid_m, num_pid_n, GROUP_M)
        acc = mma_tile(
            a_ptr, b_ptr, bid, pid_m, pid_n, k_lo, k_hi, LM, LN, KA, KB,
            stride_ab, stride_a, stride_bb, stride_b,
            BLOCK_M, BLOCK_N, BLOCK_K, A_KMAJOR, B_KMAJOR, A_VEC, B_VEC, KA_VEC, KB_VEC, PRECISION,
        )  # fmt: skip
        if (k_lo == 0) & (k_hi == k_tiles):
            epilogue(
                acc, out_ptr, c_ptr, bias_ptr, scale_ptr, bid, pid_m, pid_n, M, N,
                stride_ob, stride_om, stride_on, stride_cb, stride_cm, stride_cn, alpha, beta,
                BLOCK_M, BLOCK_N, HAS_C, BIAS_MODE, HAS_SCALE, OUT_VEC, C_VEC, N_VEC,
            )  # fmt: skip
        else:
            slot = pid * 2 + (it != start).to(tl.int32)
            store_partial(acc, ws_ptr, slot, BLOCK_M, BLOCK_N)
        it = seg_end


@triton.jit(do_not_specialize=SK_INTS)
def streamk_fixup(
    out_ptr, c_ptr, bias_ptr, scale_ptr, ws_ptr,
    M, N, K, LM, LN, KA, KB, num_tiles,
    stride_ob, stride_om, stride_on, stride_cb, stride_cm, stride_cn,
    alpha, beta, dp_tiles, programs,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    HAS_C: tl.constexpr, BIAS_MODE: tl.constexpr, HAS_SCALE: tl.constexpr,
    OUT_VEC: tl.constexpr, C_VEC: tl.constexpr, N_VEC: tl.constexpr,
):  # fmt: skip
    """One program per Stream-K tile: sum the partials of the programs that shared it, in program order."""
    tile = dp_tiles + tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    sk_iters = (num_tiles - dp_tiles).to(tl.int64) * k_tiles
    first = (tile - dp_tiles).to(tl.int64) * k_tiles  # relative to the Stream-K range
    last = first + k_tiles - 1
    p_first = ((first + 1) * programs - 1) // sk_iters
    p_last = ((last + 1) * programs - 1) // sk_iters
    if p_first != p_last:
        bid, pid_m, pid_n = tile_coords(tile, num_pid_m, num_pid_n, GROUP_M)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for p in range(p_first.to(tl.int32), p_last.to(tl.int32) + 1):
            p_start = p * sk_iters // programs
            p_end = (p + 1) * sk_iters // programs
            if p_end > p_start:  # programs with no Stream-K work wrote nothing
                slot = p * 2 + (p_start < first).to(tl.int32)
                acc += load_partial(ws_ptr, slot, BLOCK_M, BLOCK_N)
        epilogue(
            acc, out_ptr, c_ptr, bias_ptr, scale_ptr, bid, pid_m, pid_n, M, N,
            stride_ob, stride_om, stride_on, stride_cb, stride_cm, stride_cn, alpha, beta,
            BLOCK_M, BLOCK_N, HAS_C, BIAS_MODE, HAS_SCALE, OUT_VEC, C_VEC, N_VEC,
        )  # fmt: skip
