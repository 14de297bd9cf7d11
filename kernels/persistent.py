"""Persistent data-parallel GEMM: ``min(tiles, sm_count * programs_per_sm)`` programs loop over tiles, grouped order.

``FLATTEN`` (``GemmConfig.flatten``): the tile loop is ``tl.range(..., flatten=True)``, so Triton fuses it
with the K loop into one software pipeline and the next tile's first loads are in flight during this
tile's epilogue (more shared memory; faster for some entries of the space, slower for others).
"""

from __future__ import annotations

import triton
import triton.language as tl
from theodolite.kernels.epilogue import epilogue, mma_tile, tile_coords

# Runtime sizes and strides: never specialized, so one binary per config serves every shape.
RUNTIME_INTS = [
    "M", "N", "K", "LM", "LN", "KA", "KB", "num_tiles",
    "stride_ab", "stride_a", "stride_bb", "stride_b",
    "stride_ob", "stride_om", "stride_on", "stride_cb", "stride_cm", "stride_cn",
]  # fmt: skip


@triton.jit(do_not_specialize=RUNTIME_INTS)
def persistent_kernel(
    a_ptr, b_ptr, out_ptr, c_ptr, bias_ptr, scale_ptr, scale2_ptr,
    M, N, K, LM, LN, KA, KB, num_tiles,
    stride_ab, stride_a, stride_bb, stride_b,
    stride_ob, stride_om, stride_on, stride_cb, stride_cm, stride_cn,
    alpha, beta,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    A_KMAJOR: tl.constexpr, B_KMAJOR: tl.constexpr, A_VEC: tl.constexpr, B_VEC: tl.constexpr,
    KA_VEC: tl.constexpr, KB_VEC: tl.constexpr, EDGE_MASK: tl.constexpr,
    PRECISION: tl.constexpr, HAS_C: tl.constexpr, BIAS_MODE: tl.constexpr, HAS_SCALE: tl.constexpr,
    OUT_VEC: tl.constexpr, C_VEC: tl.constexpr, N_VEC: tl.constexpr,
    FLATTEN: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    for tile in tl.range(pid, num_tiles, programs, flatten=FLATTEN):
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
