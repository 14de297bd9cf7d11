"""Hopper GEMM with tensor descriptors (TMA): persistent, grouped order, operands loaded by descriptors
made on the host (``HOST_DESC``) or built in the kernel (``tl.make_tensor_descriptor``; needs
``triton.set_allocator`` for their scratch).

TMA zero-fills out-of-bounds boxes, so edges need no masks or wraps; it needs 16-byte aligned
base and row strides (gemm() copies a misaligned operand into a padded buffer, see
``config.needs_aligned_copy``).  Batched problems use 3-D descriptors.  ``FLATTEN`` as in persistent.py.
``BLOCK_N1`` > 0: a composite tile, BLOCK_M x (BLOCK_N + BLOCK_N1): one A tile feeds two dots, one per B part (each
part its own descriptor, ``b1_ptr`` the second's), and each part has its own epilogue (``config._TMA_COMPOSITE``).
``HOST_DESC`` (the default; ``THEODOLITE_TMA_HOST_DESC=0`` turns it off): the two operand descriptors come encoded
from the host as kernel parameters instead of being written to global scratch and fenced by every program (1.5 us less
GPU time per launch on the H100: experiments' ``host_desc.py``).
"""

from __future__ import annotations

import triton
import triton.language as tl
from theodolite.kernels.epilogue import epilogue_at, tile_coords
from theodolite.kernels.persistent import RUNTIME_INTS


@triton.jit
def _load_a(a_desc, bid, off_m, off_k, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr,
            A_KMAJOR: tl.constexpr, BATCHED: tl.constexpr):  # fmt: skip
    if BATCHED:
        if A_KMAJOR:  # noqa: SIM108
            a = a_desc.load([bid, off_m, off_k]).reshape(BLOCK_M, BLOCK_K)
        else:
            a = a_desc.load([bid, off_k, off_m]).reshape(BLOCK_K, BLOCK_M).T
    else:
        if A_KMAJOR:  # noqa: SIM108
            a = a_desc.load([off_m, off_k])
        else:
            a = a_desc.load([off_k, off_m]).T
    return a


@triton.jit
def _load_b(b_desc, bid, off_n, off_k, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
            B_KMAJOR: tl.constexpr, BATCHED: tl.constexpr):  # fmt: skip
    if BATCHED:
        if B_KMAJOR:  # noqa: SIM108
            b = b_desc.load([bid, off_n, off_k]).reshape(BLOCK_N, BLOCK_K).T
        else:
            b = b_desc.load([bid, off_k, off_n]).reshape(BLOCK_K, BLOCK_N)
    else:
        if B_KMAJOR:  # noqa: SIM108
            b = b_desc.load([off_n, off_k]).T
        else:
            b = b_desc.load([off_k, off_n])
    return b


@triton.jit(do_not_specialize=RUNTIME_INTS + ["batch"])
def tma_kernel(
    a_ptr, b_ptr, out_ptr, c_ptr, bias_ptr, scale_ptr, scale2_ptr, b1_ptr,
    M, N, K, LM, LN, KA, KB, num_tiles,
    stride_ab, stride_a, stride_bb, stride_b,
    stride_ob, stride_om, stride_on, stride_cb, stride_cm, stride_cn,
    alpha, beta, batch,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    A_KMAJOR: tl.constexpr, B_KMAJOR: tl.constexpr, BATCHED: tl.constexpr,
    PRECISION: tl.constexpr, HAS_C: tl.constexpr, BIAS_MODE: tl.constexpr, HAS_SCALE: tl.constexpr,
    OUT_VEC: tl.constexpr, C_VEC: tl.constexpr, N_VEC: tl.constexpr,
    FLATTEN: tl.constexpr, HOST_DESC: tl.constexpr = False, BLOCK_N1: tl.constexpr = 0,
):  # fmt: skip
    # Operand extents as stored (LM/LN: padded widths of a copied operand; TMA zero-fills past M, N, K).
    # b1_ptr: the second B part's descriptor (host) or B again (in-kernel); unused without BLOCK_N1
    if HOST_DESC:  # a_ptr and b_ptr are descriptors encoded on the host (launch._Descriptor): the same boxes
        a_desc = a_ptr
        b_desc = b_ptr
        b1_desc = b1_ptr
    elif BATCHED:
        if A_KMAJOR:  # noqa: SIM108
            a_desc = tl.make_tensor_descriptor(a_ptr, [batch, LM, K], [stride_ab, stride_a, 1], [1, BLOCK_M, BLOCK_K])
        else:
            a_desc = tl.make_tensor_descriptor(a_ptr, [batch, K, LM], [stride_ab, stride_a, 1], [1, BLOCK_K, BLOCK_M])
        if B_KMAJOR:  # noqa: SIM108
            b_desc = tl.make_tensor_descriptor(b_ptr, [batch, LN, K], [stride_bb, stride_b, 1], [1, BLOCK_N, BLOCK_K])
        else:
            b_desc = tl.make_tensor_descriptor(b_ptr, [batch, K, LN], [stride_bb, stride_b, 1], [1, BLOCK_K, BLOCK_N])
        if BLOCK_N1 > 0:
            if B_KMAJOR:  # noqa: SIM108
                b1_desc = tl.make_tensor_descriptor(
                    b1_ptr, [batch, LN, K], [stride_bb, stride_b, 1], [1, BLOCK_N1, BLOCK_K]
                )
            else:
                b1_desc = tl.make_tensor_descriptor(
                    b1_ptr, [batch, K, LN], [stride_bb, stride_b, 1], [1, BLOCK_K, BLOCK_N1]
                )
    else:
        if A_KMAJOR:  # noqa: SIM108
            a_desc = tl.make_tensor_descriptor(a_ptr, [LM, K], [stride_a, 1], [BLOCK_M, BLOCK_K])
        else:
            a_desc = tl.make_tensor_descriptor(a_ptr, [K, LM], [stride_a, 1], [BLOCK_K, BLOCK_M])
        if B_KMAJOR:  # noqa: SIM108
            b_desc = tl.make_tensor_descriptor(b_ptr, [LN, K], [stride_b, 1], [BLOCK_N, BLOCK_K])
        else:
            b_desc = tl.make_tensor_descriptor(b_ptr, [K, LN], [stride_b, 1], [BLOCK_K, BLOCK_N])
        if BLOCK_N1 > 0:
            if B_KMAJOR:  # noqa: SIM108
                b1_desc = tl.make_tensor_descriptor(b1_ptr, [LN, K], [stride_b, 1], [BLOCK_N1, BLOCK_K])
            else:
                b1_desc = tl.make_tensor_descriptor(b1_ptr, [K, LN], [stride_b, 1], [BLOCK_K, BLOCK_N1])
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    TILE_N: tl.constexpr = BLOCK_N + BLOCK_N1
    num_pid_n = tl.cdiv(N, TILE_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    for tile in tl.range(pid, num_tiles, programs, flatten=FLATTEN):
        bid, pid_m, pid_n = tile_coords(tile, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * TILE_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        if BLOCK_N1 > 0:
            acc1 = tl.zeros((BLOCK_M, BLOCK_N1), dtype=tl.float32)
        for kk in range(k_tiles):
            a = _load_a(a_desc, bid, off_m, kk * BLOCK_K, BLOCK_M, BLOCK_K, A_KMAJOR, BATCHED)
            b = _load_b(b_desc, bid, off_n, kk * BLOCK_K, BLOCK_N, BLOCK_K, B_KMAJOR, BATCHED)
            acc = tl.dot(a, b, acc, input_precision=PRECISION)
            if BLOCK_N1 > 0:
                b1 = _load_b(b1_desc, bid, off_n + BLOCK_N, kk * BLOCK_K, BLOCK_N1, BLOCK_K, B_KMAJOR, BATCHED)
                acc1 = tl.dot(a, b1, acc1, input_precision=PRECISION)
        epilogue_at(
            acc, out_ptr, c_ptr, bias_ptr, scale_ptr, scale2_ptr, bid, off_m, off_n, M, N,
            stride_ob, stride_om, stride_on, stride_cb, stride_cm, stride_cn, alpha, beta,
            BLOCK_M, BLOCK_N, HAS_C, BIAS_MODE, HAS_SCALE, OUT_VEC, C_VEC, N_VEC,
        )  # fmt: skip
        if BLOCK_N1 > 0:
            epilogue_at(
                acc1, out_ptr, c_ptr, bias_ptr, scale_ptr, scale2_ptr, bid, off_m, off_n + BLOCK_N, M, N,
                stride_ob, stride_om, stride_on, stride_cb, stride_cm, stride_cn, alpha, beta,
                BLOCK_M, BLOCK_N1, HAS_C, BIAS_MODE, HAS_SCALE, OUT_VEC, C_VEC, N_VEC,
            )  # fmt: skip
