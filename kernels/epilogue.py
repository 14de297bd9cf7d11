"""Triton helpers every variant shares: tile order, the K loop of one tile, and the epilogue.

Sizes and strides are runtime ints the JIT does not specialize (``do_not_specialize``), so one
compiled binary per config serves every shape; what vector loads need is passed as
constexpr facts instead (which dimension is contiguous, whether rows are 16-byte aligned).
"""

from __future__ import annotations

import os

import triton
import triton.language as tl

# Element-wise (misaligned, A_VEC/B_VEC 1) operands are addressed by int32 offsets from a scalar base that walks K,
# instead of a 64-bit pointer per element carried across the K loop (half the registers).  THEODOLITE_SCALAR_OFFSETS=0
# (read at import) restores the pointers, for side-by-side experiments.
SCALAR_OFFSETS = tl.constexpr(os.environ.get("THEODOLITE_SCALAR_OFFSETS", "1") != "0")
# An element-wise operand whose contiguous dimension is M or N (B row-major, A column-major) has its clamped offsets
# declared contiguous along that dimension, so that Triton's coalescing pass puts a warp's threads along the row.
# Without it the clamp hides the contiguity, and Triton laid the threads along K: each warp load touched 32 rows
# (H100, B [K, N] row-major; experiments' scalar_coalesce.py).  Safe: the offsets' divisibility stays 1 (the clamp), so
# no load is vectorized on the strength of it.  THEODOLITE_SCALAR_COALESCE=0 (read at import) turns it off.
SCALAR_COALESCE = tl.constexpr(os.environ.get("THEODOLITE_SCALAR_COALESCE", "1") != "0")


@triton.jit
def tile_coords(tile, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """Batch index and (pid_m, pid_n) of a linear tile index, in grouped (swizzled) order for L2 reuse."""
    tiles_per_batch = num_pid_m * num_pid_n
    bid = tile // tiles_per_batch
    t = tile % tiles_per_batch
    in_group = GROUP_M * num_pid_n
    group = t // in_group
    first_m = group * GROUP_M
    group_m = min(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + ((t % in_group) % group_m)
    pid_n = (t % in_group) // group_m
    return bid, pid_m, pid_n


@triton.jit
def mma_tile(
    a_ptr,
    b_ptr,
    bid,
    pid_m,
    pid_n,
    k_lo,
    k_hi,
    LM,
    LN,
    KA,
    KB,
    stride_ab,
    stride_a,
    stride_bb,
    stride_b,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    A_KMAJOR: tl.constexpr,
    B_KMAJOR: tl.constexpr,
    A_VEC: tl.constexpr,
    B_VEC: tl.constexpr,
    KA_VEC: tl.constexpr,
    KB_VEC: tl.constexpr,
    PRECISION: tl.constexpr,
    EDGE_MASK: tl.constexpr,
):
    """fp32 accumulator of one output tile over K iterations [k_lo, k_hi) (in BLOCK_K steps).

    Rows/columns past the edge wrap (``% LM``, ``% LN``), so loads along a contiguous M or N stay
    vectorizable; the store masks them.  ``EDGE_MASK`` masks them as well (not loaded): bit 1 the rows, bit 2 the
    columns (``config.EDGE_ROWS``, ``EDGE_COLUMNS``).  Columns: the edge tile of a ragged N then reads no duplicate
    columns (split-K 16x64 tiles on ragged N: 1.2-1.5x faster, H100), but the per-element mask costs the large
    persistent tiles up to 3x, so the launch masks both for split-K's small tiles, and otherwise only a dimension
    smaller than its tile, where every tile would read its few rows over and over (``config.edge_mask``).  K is
    masked every step (one pipelined loop; a separate tail step costs ~40 registers and spills).
    ``A_VEC``/``B_VEC`` (elements per 16 bytes, or 1) promise
    aligned strides and row starts.  An element-wise operand (1) is addressed by int32 offsets inside the tile
    (``SCALAR_OFFSETS``): its rows/columns past the edge are clamped to the last one instead of wrapped (loaded, never
    stored), and the host copies rows too long for the offsets (``config.SCALAR_OFFSET_MAX_ROW``).
    """
    if A_VEC > 1:  # (x // v) * v: divisibility the compiler can see (multiple_of on an argument is lost)
        stride_a = (stride_a // A_VEC) * A_VEC
        stride_ab = (stride_ab // A_VEC) * A_VEC
    if B_VEC > 1:
        stride_b = (stride_b // B_VEC) * B_VEC
        stride_bb = (stride_bb // B_VEC) * B_VEC
    rm = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % LM
    rn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % LN
    # rows/columns inside the edge, along a contiguous M or N with the divisibility the host vouches for (the
    # stored extent is a multiple of the vector when A_VEC/B_VEC > 1), so that a mask stays constant over a vector
    if (EDGE_MASK & 1) != 0:
        m_in = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) < (LM if A_KMAJOR else (LM // A_VEC) * A_VEC)
    if (EDGE_MASK & 2) != 0:
        n_in = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) < (LN if B_KMAJOR else (LN // B_VEC) * B_VEC)
    if A_VEC > 1:
        rm = tl.max_contiguous(tl.multiple_of(rm, A_VEC), A_VEC)
    if B_VEC > 1:
        rn = tl.max_contiguous(tl.multiple_of(rn, B_VEC), B_VEC)
    rk = tl.arange(0, BLOCK_K)
    k0 = tl.cast(k_lo, tl.int64) * BLOCK_K
    a_base = a_ptr + tl.cast(bid, tl.int64) * stride_ab
    b_base = b_ptr + tl.cast(bid, tl.int64) * stride_bb
    if SCALAR_OFFSETS and A_VEC == 1:  # element-wise: int32 offsets (one register each), a scalar base walks K
        first_m = pid_m * BLOCK_M
        lm = tl.minimum(first_m + tl.arange(0, BLOCK_M), LM - 1) - first_m
        if SCALAR_COALESCE and not A_KMAJOR:
            lm = tl.max_contiguous(lm, BLOCK_M)
        if A_KMAJOR:
            a_ptrs = a_base + tl.cast(first_m, tl.int64) * stride_a + k0
            a_offs = lm[:, None] * stride_a + rk[None, :]
            a_step = BLOCK_K
        else:
            a_ptrs = a_base + k0 * stride_a + first_m
            a_offs = lm[:, None] + rk[None, :] * stride_a
            a_step = BLOCK_K * stride_a
    elif A_KMAJOR:
        a_ptrs = a_base + k0 + rm.to(tl.int64)[:, None] * stride_a + rk[None, :]
        a_step = BLOCK_K
    else:
        a_ptrs = a_base + k0 * stride_a + rm[:, None] + rk.to(tl.int64)[None, :] * stride_a
        a_step = BLOCK_K * stride_a
    if SCALAR_OFFSETS and B_VEC == 1:
        first_n = pid_n * BLOCK_N
        ln = tl.minimum(first_n + tl.arange(0, BLOCK_N), LN - 1) - first_n
        if SCALAR_COALESCE and not B_KMAJOR:
            ln = tl.max_contiguous(ln, BLOCK_N)
        if B_KMAJOR:
            b_ptrs = b_base + tl.cast(first_n, tl.int64) * stride_b + k0
            b_offs = rk[:, None] + ln[None, :] * stride_b
            b_step = BLOCK_K
        else:
            b_ptrs = b_base + k0 * stride_b + first_n
            b_offs = rk[:, None] * stride_b + ln[None, :]
            b_step = BLOCK_K * stride_b
    elif B_KMAJOR:
        b_ptrs = b_base + k0 + rk[:, None] + rn.to(tl.int64)[None, :] * stride_b
        b_step = BLOCK_K
    else:
        b_ptrs = b_base + k0 * stride_b + rk.to(tl.int64)[:, None] * stride_b + rn[None, :]
        b_step = BLOCK_K * stride_b
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    # K extents for the masks, with the divisibility the host vouches for (KA_VEC/KB_VEC), so a
    # mask along a contiguous K keeps 16-byte loads; a zero-padded copy extends KA/KB to the pad.
    ka = (KA // KA_VEC) * KA_VEC - k_lo * BLOCK_K
    kb = (KB // KB_VEC) * KB_VEC - k_lo * BLOCK_K
    for _ in range(k_lo, k_hi):
        a_at = a_ptrs + a_offs if SCALAR_OFFSETS and A_VEC == 1 else a_ptrs
        b_at = b_ptrs + b_offs if SCALAR_OFFSETS and B_VEC == 1 else b_ptrs
        if (EDGE_MASK & 1) != 0:
            a = tl.load(a_at, mask=(rk[None, :] < ka) & m_in[:, None], other=0.0)
        else:
            a = tl.load(a_at, mask=rk[None, :] < ka, other=0.0)
        if (EDGE_MASK & 2) != 0:
            b = tl.load(b_at, mask=(rk[:, None] < kb) & n_in[None, :], other=0.0)
        else:
            b = tl.load(b_at, mask=rk[:, None] < kb, other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
        a_ptrs += a_step
        b_ptrs += b_step
        ka -= BLOCK_K
        kb -= BLOCK_K
    return acc


@triton.jit
def epilogue(
    acc,
    out_ptr,
    c_ptr,
    bias_ptr,
    scale_ptr,
    scale2_ptr,
    bid,
    pid_m,
    pid_n,
    M,
    N,
    stride_ob,
    stride_om,
    stride_on,
    stride_cb,
    stride_cm,
    stride_cn,
    alpha,
    beta,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    HAS_C: tl.constexpr,
    BIAS_MODE: tl.constexpr,
    HAS_SCALE: tl.constexpr,
    OUT_VEC: tl.constexpr,
    C_VEC: tl.constexpr,
    N_VEC: tl.constexpr,
):
    """``epilogue_at`` for the tile (pid_m, pid_n) of BLOCK_M x BLOCK_N tiles."""
    epilogue_at(
        acc, out_ptr, c_ptr, bias_ptr, scale_ptr, scale2_ptr, bid, pid_m * BLOCK_M, pid_n * BLOCK_N, M, N,
        stride_ob, stride_om, stride_on, stride_cb, stride_cm, stride_cn, alpha, beta,
        BLOCK_M, BLOCK_N, HAS_C, BIAS_MODE, HAS_SCALE, OUT_VEC, C_VEC, N_VEC,
    )  # fmt: skip


@triton.jit
def epilogue_at(
    acc,
    out_ptr,
    c_ptr,
    bias_ptr,
    scale_ptr,
    scale2_ptr,
    bid,
    off_m,
    off_n,
    M,
    N,
    stride_ob,
    stride_om,
    stride_on,
    stride_cb,
    stride_cm,
    stride_cn,
    alpha,
    beta,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    HAS_C: tl.constexpr,
    BIAS_MODE: tl.constexpr,
    HAS_SCALE: tl.constexpr,
    OUT_VEC: tl.constexpr,
    C_VEC: tl.constexpr,
    N_VEC: tl.constexpr,
):
    """out = alpha * scale * acc + beta * C + bias (scale: fp8's, per tensor or per row and column), cast to out's
    dtype, for the BLOCK_M x BLOCK_N block at rows ``off_m`` and columns ``off_n`` (a composite tile's parts have
    their own); rows/columns past the edge masked.

    ``BIAS_MODE``: 0 none, 1 per column (length N), 2 per row (length M).  ``OUT_VEC``/``C_VEC``:
    0 for any strides, v >= 1 when columns are contiguous and row/batch strides are multiples of v;
    ``N_VEC`` divides N.  Without these the stores are scalar (sizes and strides are not specialized).
    """
    rm = off_m + tl.arange(0, BLOCK_M)
    rn = off_n + tl.arange(0, BLOCK_N)
    n_bound = (N // N_VEC) * N_VEC
    mask = (rm[:, None] < M) & (rn[None, :] < n_bound)
    # fp8's scales (kernels.operands.SCALE_*): one fp32 element (1, 2: scale_a's and scale_b's), or one per row of A
    # and one per column of B (3 both; 4 rows, 5 columns alone; 6 rows, 7 columns, with one element in scale2_ptr)
    if HAS_SCALE == 1 or HAS_SCALE == 2:
        alpha = alpha * tl.load(scale_ptr)
    if HAS_SCALE == 2 or HAS_SCALE >= 6:
        alpha = alpha * tl.load(scale2_ptr)
    acc = acc * alpha
    if HAS_SCALE == 3 or HAS_SCALE == 4 or HAS_SCALE == 6:
        acc = acc * tl.load(scale_ptr + rm, mask=rm < M, other=0.0)[:, None]
    if HAS_SCALE == 5 or HAS_SCALE == 7:
        acc = acc * tl.load(scale_ptr + rn, mask=rn < N, other=0.0)[None, :]
    if HAS_SCALE == 3:
        acc = acc * tl.load(scale2_ptr + rn, mask=rn < N, other=0.0)[None, :]
    if HAS_C:
        if C_VEC > 0:
            stride_cm = (stride_cm // C_VEC) * C_VEC
            stride_cb = (stride_cb // C_VEC) * C_VEC
            c_cols = rn[None, :]
        else:
            c_cols = rn[None, :] * stride_cn
        c_ptrs = c_ptr + tl.cast(bid, tl.int64) * stride_cb + rm.to(tl.int64)[:, None] * stride_cm + c_cols
        acc += beta * tl.load(c_ptrs, mask=mask, other=0.0).to(tl.float32)
    if BIAS_MODE == 1:
        acc += tl.load(bias_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)[None, :]
    if BIAS_MODE == 2:
        acc += tl.load(bias_ptr + rm, mask=rm < M, other=0.0).to(tl.float32)[:, None]
    if OUT_VEC > 0:
        stride_om = (stride_om // OUT_VEC) * OUT_VEC
        stride_ob = (stride_ob // OUT_VEC) * OUT_VEC
        out_cols = rn[None, :]
    else:
        out_cols = rn[None, :] * stride_on
    out_ptrs = out_ptr + tl.cast(bid, tl.int64) * stride_ob + rm.to(tl.int64)[:, None] * stride_om + out_cols
    tl.store(out_ptrs, acc.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def store_partial(acc, ws_ptr, slot, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Write an fp32 partial tile to workspace slot ``slot`` (each slot is one BLOCK_M x BLOCK_N tile)."""
    r = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    tl.store(ws_ptr + tl.cast(slot, tl.int64) * (BLOCK_M * BLOCK_N) + r, acc)


@triton.jit
def sum_partials(ws_ptr, first, count, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """fp32 sum of the partial tiles in slots ``first`` .. ``first + count - 1``, in slot order (deterministic).

    ``.cg`` loads: other SMs wrote them, past this SM's L1.  A loop, not unrolled: unrolled, every partial's
    loads are issued at once and stay live (split-K 64x128 with 16 slices spilled 2.5 KB)."""
    r = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    base = ws_ptr + tl.cast(first, tl.int64) * (BLOCK_M * BLOCK_N)
    total = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for i in tl.range(count, loop_unroll_factor=1):
        total += tl.load(base + i * (BLOCK_M * BLOCK_N) + r, cache_modifier=".cg")
    return total
