"""Split-K GEMM for small M*N with large K, in one launch: ``split_k`` programs per tile write fp32
partials; the last program of a tile to arrive (a per-tile arrival counter) adds them in fixed slice
order and applies the epilogue (deterministic: the counter only picks who adds, never the order).
With ``SPIN`` (a deep split whose whole grid is resident at once: ``config.cooperative_reduction``) every
slice instead waits for the others and reduces its share of the tile's row chunks; both are a Stream-K
tail's reduction (``streamk._reduce_slices``): the last arriver's chain of ``split`` partial tiles becomes a share each.
``splitk_reduce`` is the former second-launch reduction, kept for reference and tests."""

from __future__ import annotations

import triton
import triton.language as tl
from theodolite.kernels.epilogue import epilogue, mma_tile, tile_coords
from theodolite.kernels.persistent import RUNTIME_INTS
from theodolite.kernels.streamk import _reduce_slices


@triton.jit(do_not_specialize=RUNTIME_INTS)
def splitk_kernel(
    a_ptr, b_ptr, out_ptr, c_ptr, bias_ptr, scale_ptr, scale2_ptr, ws_ptr, lock_ptr,
    M, N, K, LM, LN, KA, KB, num_tiles,
    stride_ab, stride_a, stride_bb, stride_b,
    stride_ob, stride_om, stride_on, stride_cb, stride_cm, stride_cn,
    alpha, beta,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    SPLIT_K: tl.constexpr,
    A_KMAJOR: tl.constexpr, B_KMAJOR: tl.constexpr, A_VEC: tl.constexpr, B_VEC: tl.constexpr,
    KA_VEC: tl.constexpr, KB_VEC: tl.constexpr, EDGE_MASK: tl.constexpr,
    PRECISION: tl.constexpr, HAS_C: tl.constexpr, BIAS_MODE: tl.constexpr, HAS_SCALE: tl.constexpr,
    OUT_VEC: tl.constexpr, C_VEC: tl.constexpr, N_VEC: tl.constexpr,
    CHUNKS: tl.constexpr = 8, SPIN: tl.constexpr = False,
):  # fmt: skip
    """Grid (tiles, SPLIT_K), one launch.  Partial s of tile t goes to ws[t, s] (an fp32 BLOCK_M x BLOCK_N
    block); then the program counts itself in at lock[t], and the last of the tile's SPLIT_K programs
    to arrive adds the partials in slice order 0..SPLIT_K-1 (the same order whoever arrives last:
    deterministic), resets lock[t] to 0 for the next launch and applies the epilogue."""
    tile = tl.program_id(0)
    s = tl.program_id(1)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    per = tl.cdiv(k_tiles, SPLIT_K)
    k_lo = tl.minimum(s * per, k_tiles)
    k_hi = tl.minimum(k_lo + per, k_tiles)
    bid, pid_m, pid_n = tile_coords(tile, num_pid_m, num_pid_n, GROUP_M)
    acc = mma_tile(
        a_ptr, b_ptr, bid, pid_m, pid_n, k_lo, k_hi, LM, LN, KA, KB,
        stride_ab, stride_a, stride_bb, stride_b,
        BLOCK_M, BLOCK_N, BLOCK_K, A_KMAJOR, B_KMAJOR, A_VEC, B_VEC, KA_VEC, KB_VEC, PRECISION, EDGE_MASK,
    )  # fmt: skip
    # the partial to ws[tile * SPLIT_K + s], counted in at lock[tile]; then the last slice to arrive reduces the tile,
    # or (SPIN: config.cooperative_reduction on a GPU) every slice its row chunks s, s + SPLIT_K, ... after all arrived
    _reduce_slices(
        acc, ws_ptr, lock_ptr, tile, s, SPLIT_K, out_ptr, c_ptr, bias_ptr, scale_ptr, scale2_ptr, bid, pid_m, pid_n,
        M, N,
        stride_ob, stride_om, stride_on, stride_cb, stride_cm, stride_cn, alpha, beta,
        BLOCK_M, BLOCK_N, HAS_C, BIAS_MODE, HAS_SCALE, OUT_VEC, C_VEC, N_VEC, CHUNKS, SPIN,
    )  # fmt: skip


@triton.jit(do_not_specialize=RUNTIME_INTS)
def splitk_reduce(
    out_ptr, c_ptr, bias_ptr, scale_ptr, scale2_ptr, ws_ptr,
    M, N, num_tiles,
    stride_ob, stride_om, stride_on, stride_cb, stride_cm, stride_cn,
    alpha, beta,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr, SPLIT_K: tl.constexpr,
    HAS_C: tl.constexpr, BIAS_MODE: tl.constexpr, HAS_SCALE: tl.constexpr,
    OUT_VEC: tl.constexpr, C_VEC: tl.constexpr, N_VEC: tl.constexpr,
):  # fmt: skip
    """One program per tile: partials added in split order 0..SPLIT_K-1, then the epilogue."""
    tile = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    bid, pid_m, pid_n = tile_coords(tile, num_pid_m, num_pid_n, GROUP_M)
    r = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for s in tl.static_range(SPLIT_K):
        acc += tl.load(ws_ptr + (s * num_tiles + tile).to(tl.int64) * (BLOCK_M * BLOCK_N) + r)
    epilogue(
        acc, out_ptr, c_ptr, bias_ptr, scale_ptr, scale2_ptr, bid, pid_m, pid_n, M, N,
        stride_ob, stride_om, stride_on, stride_cb, stride_cm, stride_cn, alpha, beta,
        BLOCK_M, BLOCK_N, HAS_C, BIAS_MODE, HAS_SCALE, OUT_VEC, C_VEC, N_VEC,
    )  # fmt: skip
