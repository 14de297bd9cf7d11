"""Stream-K GEMM, hybrid form: full waves of tiles data-parallel, the last partial wave's tiles split along K.

``config.streamk_partition`` sets the split: each remaining tile is cut into ``split`` equal runs of K-steps,
one program each, so the programs of the tail walk K in lockstep and share their rows and columns in L2
(Stream-K's textbook contiguous shares of all K-steps put every program at a different K; on the H100 that
ran 1.6x slower per K-step).  One launch: each slice writes its fp32 partial tile to the workspace and
counts itself in at the tile's arrival counter.  Then, with ``SPIN`` (GPU), every slice of the tile waits for
the others and reduces its share of the tile's row chunks, adding the partials in slice order; without it
(the interpreter, which runs programs one after another) the last slice to arrive reduces the whole tile, in
the same order.  Either way the sum is deterministic.  ``SPIN`` needs a tile's ``split`` programs resident
together: they are consecutive program ids and the grid is at most one wave, so programs dispatched in order
make progress.
"""

from __future__ import annotations

import triton
import triton.language as tl
from theodolite.kernels.epilogue import epilogue, mma_tile, sum_partials, tile_coords
from theodolite.kernels.persistent import RUNTIME_INTS

SK_INTS = RUNTIME_INTS + ["dp_tiles", "split"]


@triton.jit(do_not_specialize=SK_INTS)
def streamk_kernel(
    a_ptr, b_ptr, out_ptr, c_ptr, bias_ptr, scale_ptr, scale2_ptr, ws_ptr, lock_ptr,
    M, N, K, LM, LN, KA, KB, num_tiles,
    stride_ab, stride_a, stride_bb, stride_b,
    stride_ob, stride_om, stride_on, stride_cb, stride_cm, stride_cn,
    alpha, beta, dp_tiles, split,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    A_KMAJOR: tl.constexpr, B_KMAJOR: tl.constexpr, A_VEC: tl.constexpr, B_VEC: tl.constexpr,
    KA_VEC: tl.constexpr, KB_VEC: tl.constexpr, EDGE_MASK: tl.constexpr,
    PRECISION: tl.constexpr, HAS_C: tl.constexpr, BIAS_MODE: tl.constexpr, HAS_SCALE: tl.constexpr,
    OUT_VEC: tl.constexpr, C_VEC: tl.constexpr, N_VEC: tl.constexpr,
    CHUNKS: tl.constexpr, SPIN: tl.constexpr,
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
            BLOCK_M, BLOCK_N, BLOCK_K, A_KMAJOR, B_KMAJOR, A_VEC, B_VEC, KA_VEC, KB_VEC, PRECISION, EDGE_MASK,
        )  # fmt: skip
        epilogue(
            acc, out_ptr, c_ptr, bias_ptr, scale_ptr, scale2_ptr, bid, pid_m, pid_n, M, N,
            stride_ob, stride_om, stride_on, stride_cb, stride_cm, stride_cn, alpha, beta,
            BLOCK_M, BLOCK_N, HAS_C, BIAS_MODE, HAS_SCALE, OUT_VEC, C_VEC, N_VEC,
        )  # fmt: skip
    # The tail: slice j of remaining tile rel is program rel * split + j (the launch makes the grid hold them all).
    units = (num_tiles - dp_tiles) * split
    for u in range(pid, units, programs):
        rel = u // split
        j = u % split
        bid, pid_m, pid_n = tile_coords(dp_tiles + rel, num_pid_m, num_pid_n, GROUP_M)
        acc = mma_tile(
            a_ptr, b_ptr, bid, pid_m, pid_n, j * k_tiles // split, (j + 1) * k_tiles // split, LM, LN, KA, KB,
            stride_ab, stride_a, stride_bb, stride_b,
            BLOCK_M, BLOCK_N, BLOCK_K, A_KMAJOR, B_KMAJOR, A_VEC, B_VEC, KA_VEC, KB_VEC, PRECISION, EDGE_MASK,
        )  # fmt: skip
        if split == 1:
            epilogue(
                acc, out_ptr, c_ptr, bias_ptr, scale_ptr, scale2_ptr, bid, pid_m, pid_n, M, N,
                stride_ob, stride_om, stride_on, stride_cb, stride_cm, stride_cn, alpha, beta,
                BLOCK_M, BLOCK_N, HAS_C, BIAS_MODE, HAS_SCALE, OUT_VEC, C_VEC, N_VEC,
            )  # fmt: skip
        else:
            _reduce_slices(
                acc, ws_ptr, lock_ptr, rel, j, split, out_ptr, c_ptr, bias_ptr, scale_ptr, scale2_ptr, bid, pid_m,
                pid_n, M, N,
                stride_ob, stride_om, stride_on, stride_cb, stride_cm, stride_cn, alpha, beta,
                BLOCK_M, BLOCK_N, HAS_C, BIAS_MODE, HAS_SCALE, OUT_VEC, C_VEC, N_VEC, CHUNKS, SPIN,
            )  # fmt: skip


@triton.jit
def _reduce_slices(
    acc, ws_ptr, lock_ptr, rel, j, split, out_ptr, c_ptr, bias_ptr, scale_ptr, scale2_ptr, bid, pid_m, pid_n, M, N,
    stride_ob, stride_om, stride_on, stride_cb, stride_cm, stride_cn, alpha, beta,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HAS_C: tl.constexpr, BIAS_MODE: tl.constexpr,
    HAS_SCALE: tl.constexpr, OUT_VEC: tl.constexpr, C_VEC: tl.constexpr, N_VEC: tl.constexpr,
    CHUNKS: tl.constexpr, SPIN: tl.constexpr,
):  # fmt: skip
    """Store slice j's partial of tile rel, count it in; reduce in slice order 0..split-1 and apply the epilogue
    (SPIN: every slice its row chunks j, j + split, ... after all arrived; else the last to arrive, all rows)."""
    tile_elems: tl.constexpr = BLOCK_M * BLOCK_N
    base = ws_ptr + rel.to(tl.int64) * split * tile_elems
    r = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    tl.store(base + j * tile_elems + r, acc)
    tl.debug_barrier()  # every thread's share of the partial is written before the release below
    arrived = tl.atomic_add(lock_ptr + rel, 1, sem="acq_rel", scope="gpu")
    if SPIN:
        seen = arrived + 1
        while seen < split:
            seen = tl.atomic_add(lock_ptr + rel, 0, sem="acquire", scope="gpu")
        ROWS: tl.constexpr = BLOCK_M // CHUNKS
        rc = tl.arange(0, ROWS)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
        for chunk in range(j, CHUNKS, split):
            total = tl.zeros((ROWS, BLOCK_N), dtype=tl.float32)
            for i in range(split):
                total += tl.load(base + i * tile_elems + chunk * (ROWS * BLOCK_N) + rc, cache_modifier=".cg")
            epilogue(
                total, out_ptr, c_ptr, bias_ptr, scale_ptr, scale2_ptr, bid, pid_m * CHUNKS + chunk, pid_n, M, N,
                stride_ob, stride_om, stride_on, stride_cb, stride_cm, stride_cn, alpha, beta,
                ROWS, BLOCK_N, HAS_C, BIAS_MODE, HAS_SCALE, OUT_VEC, C_VEC, N_VEC,
            )  # fmt: skip
        # the last slice to leave resets the counter for the next launch (all have passed the wait by then)
        left = tl.atomic_add(lock_ptr + rel, 1, sem="relaxed", scope="gpu")
        if left == 2 * split - 1:
            tl.atomic_xchg(lock_ptr + rel, 0, sem="relaxed", scope="gpu")
    else:
        if arrived == split - 1:
            total = sum_partials(ws_ptr, rel.to(tl.int64) * split, split, BLOCK_M, BLOCK_N)
            tl.atomic_xchg(lock_ptr + rel, 0, sem="relaxed", scope="gpu")
            epilogue(
                total, out_ptr, c_ptr, bias_ptr, scale_ptr, scale2_ptr, bid, pid_m, pid_n, M, N,
                stride_ob, stride_om, stride_on, stride_cb, stride_cm, stride_cn, alpha, beta,
                BLOCK_M, BLOCK_N, HAS_C, BIAS_MODE, HAS_SCALE, OUT_VEC, C_VEC, N_VEC,
            )  # fmt: skip
