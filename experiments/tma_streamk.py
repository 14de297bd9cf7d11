"""Stream-K's split tail on the TMA kernel: does a TMA 128x128 tile fill the SMs where 128x256 leaves them idle?

dev124 768x3200x4224 reads 0.76x of torch.matmul with the space's best (78 tiles of 128x256 on 132 SMs: 54 SMs idle;
cuBLAS runs 128x160, one wave of 120).  The space's Stream-K (``kernels/streamk.py``: full waves data-parallel, the last
partial wave's tiles in ``split`` equal K-slices) would cut 150 tiles of 128x128 into one wave plus an eighth, but it
loads its operands with pointers, and there 128x128 tiles run slower than with TMA (dev124: persistent 128x128 w8 71.7
us, TMA 47.5, Stream-K 49.2; one TMA wave of 128x128 is ~24 us).  This kernel is the TMA kernel's tile loop over the
data-parallel tiles, then the split tail with the Stream-K kernel's reduction (``streamk._reduce_slices``: every slice
reduces its row chunks after a spin-wait), the partition from ``config.streamk_partition``.

For every shape of both suites (bf16, batch 1, aligned: TMA needs it) where a TMA tile of the space leaves a partial last
wave that the policy splits, those tiles' split-tail launches (``tmask/...``) beside the sweep's three fastest configs
and torch.matmul, as ``validate`` times a shape.  Run on a GPU from the repository root (writes
``$OUT/tma-streamk-<gpu>.json``)::

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/tma_streamk.py [--all]

Without ``--all`` only the shapes whose committed final round reads under 1.0x of torch.matmul; ``--m 128,512`` every
llm shape with those M (the decoder's prefill rows of ``bench-linear``), whatever its final round.
"""

import functools
import sys
from typing import Any

import triton
import triton.language as tl
from theodolite.kernels.epilogue import epilogue, tile_coords
from theodolite.kernels.persistent import RUNTIME_INTS
from theodolite.kernels.streamk import _reduce_slices
from theodolite.kernels.tma import _load_a, _load_b

BAR = 1.0


@triton.jit(do_not_specialize=RUNTIME_INTS + ["batch", "dp_tiles", "split"])
def tma_streamk_kernel(
    a_ptr, b_ptr, out_ptr, c_ptr, bias_ptr, scale_ptr, scale2_ptr, ws_ptr, lock_ptr,
    M, N, K, LM, LN, KA, KB, num_tiles,
    stride_ab, stride_a, stride_bb, stride_b,
    stride_ob, stride_om, stride_on, stride_cb, stride_cm, stride_cn,
    alpha, beta, batch, dp_tiles, split,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    A_KMAJOR: tl.constexpr, B_KMAJOR: tl.constexpr, BATCHED: tl.constexpr,
    PRECISION: tl.constexpr, HAS_C: tl.constexpr, BIAS_MODE: tl.constexpr, HAS_SCALE: tl.constexpr,
    OUT_VEC: tl.constexpr, C_VEC: tl.constexpr, N_VEC: tl.constexpr,
    FLATTEN: tl.constexpr, HOST_DESC: tl.constexpr, CHUNKS: tl.constexpr, SPIN: tl.constexpr,
):  # fmt: skip
    """The TMA kernel (host descriptors, batch 1) over tiles [0, dp_tiles), then tile dp_tiles + u // split's K-slice
    u % split for u in [0, (num_tiles - dp_tiles) * split), reduced as the Stream-K kernel reduces its tail."""
    a_desc = a_ptr
    b_desc = b_ptr
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    for tile in tl.range(pid, dp_tiles, programs, flatten=FLATTEN):
        bid, pid_m, pid_n = tile_coords(tile, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for kk in range(k_tiles):
            a = _load_a(a_desc, bid, off_m, kk * BLOCK_K, BLOCK_M, BLOCK_K, A_KMAJOR, BATCHED)
            b = _load_b(b_desc, bid, off_n, kk * BLOCK_K, BLOCK_N, BLOCK_K, B_KMAJOR, BATCHED)
            acc = tl.dot(a, b, acc, input_precision=PRECISION)
        epilogue(
            acc, out_ptr, c_ptr, bias_ptr, scale_ptr, scale2_ptr, bid, pid_m, pid_n, M, N,
            stride_ob, stride_om, stride_on, stride_cb, stride_cm, stride_cn, alpha, beta,
            BLOCK_M, BLOCK_N, HAS_C, BIAS_MODE, HAS_SCALE, OUT_VEC, C_VEC, N_VEC,
        )  # fmt: skip
    units = (num_tiles - dp_tiles) * split
    for u in range(pid, units, programs):
        rel = u // split
        j = u % split
        bid, pid_m, pid_n = tile_coords(dp_tiles + rel, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for kk in range(j * k_tiles // split, (j + 1) * k_tiles // split):
            a = _load_a(a_desc, bid, off_m, kk * BLOCK_K, BLOCK_M, BLOCK_K, A_KMAJOR, BATCHED)
            b = _load_b(b_desc, bid, off_n, kk * BLOCK_K, BLOCK_N, BLOCK_K, B_KMAJOR, BATCHED)
            acc = tl.dot(a, b, acc, input_precision=PRECISION)
        _reduce_slices(
            acc, ws_ptr, lock_ptr, rel, j, split, out_ptr, c_ptr, bias_ptr, scale_ptr, scale2_ptr, bid, pid_m, pid_n, M, N,
            stride_ob, stride_om, stride_on, stride_cb, stride_cm, stride_cn, alpha, beta,
            BLOCK_M, BLOCK_N, HAS_C, BIAS_MODE, HAS_SCALE, OUT_VEC, C_VEC, N_VEC, CHUNKS, SPIN,
        )  # fmt: skip


def partition(m: int, n: int, k: int, key: str, programs: int) -> tuple[int, int, int]:
    """(tiles, data-parallel tiles, split) of the TMA config ``key`` on ``programs`` resident programs."""
    from theodolite.kernels.config import GemmConfig, streamk_partition

    c = GemmConfig.from_key(key)
    tiles = -(-m // c.block_m) * -(-n // c.block_n)
    dp, split = streamk_partition(tiles, programs, -(-k // c.block_k))
    return tiles, dp, split


@functools.cache
def resident(key: str) -> int:
    """Programs of config ``key`` resident on the device at once (SMs x programs per SM, as the launcher counts)."""
    import torch
    from theodolite.kernels.config import GemmConfig, programs_per_sm
    from theodolite.kernels.launch import device_limits

    limits = device_limits(torch.device("cuda"))
    return limits.sm_count * programs_per_sm(GemmConfig.from_key(key), "bf16", limits)


def plans_for(sets: list[tuple[Any, Any, Any]], key: str, _extra: Any = None) -> list[Any]:
    """Each (A, B, out) set's plan of ``tmask/<tile>`` (the TMA config ``tma/<tile>``) with its kernel launch swapped
    for ``tma_streamk_kernel`` on the Stream-K partition (ValueError where the policy splits no tail)."""
    from theodolite.kernels.config import TAIL_CHUNKS, GemmConfig
    from theodolite.kernels.launch import _Launch, _locks, _workspace, interpreting, plan_gemm

    tma_key = "tma/" + key.split("/", 1)[1]
    config = GemmConfig.from_key(tma_key)
    programs = resident(tma_key)
    out = []
    for a, b, o in sets:
        m, k = a.shape
        n = b.shape[1]
        tiles, dp, split = partition(m, n, k, tma_key, programs)
        plan = plan_gemm(a, b, config, out=o)
        step = plan.steps[-1]
        if split < 2 or not step.kwargs.get("HOST_DESC"):
            raise ValueError(f"{key} on {m}x{n}x{k}: no split tail ({tiles} tiles, split {split})")
        units = (tiles - dp) * split
        ws = _workspace(o.device, units * config.block_m * config.block_n)
        locks = _locks(o.device, tiles - dp)
        grid = (max(1, min(programs, max(dp, units))),)
        kwargs = dict(step.kwargs, dp_tiles=dp, split=split, CHUNKS=TAIL_CHUNKS, SPIN=not interpreting())
        plan.steps[-1] = _Launch(tma_streamk_kernel, grid, (*step.args[:7], ws, locks), kwargs)  # not b1_ptr (no composite tiles)
        out.append(plan)
    return out


def candidates(s: Any, every: bool, programs: Any) -> list[str]:
    """The TMA tiles of the space (unflattened, as ``tmask/``) whose last partial wave the policy splits on this shape;
    none for batched or misaligned shapes, or (without ``every``) where the final round reads at or over BAR of torch.matmul."""
    from theodolite.kernels.config import config_space

    if s.batch != 1 or s.N % 8 or s.K % 8:  # TMA reads aligned rows; misaligned operands would be copied first
        return []
    final = s.final_ms or {}
    ours = [t for c, t in final.items() if c != "torch" and t]
    if not every and (not final.get("torch") or not ours or final["torch"] / min(ours) >= BAR):
        return []
    keys = []
    for c in config_space("bf16", ("tma",)):
        if c.block_n1:  # composite tiles: this kernel has one accumulator
            continue
        key = "tmask/" + c.key.split("/", 1)[1].removesuffix("/f")
        if key not in keys and partition(s.M, s.N, s.K, c.key, programs(c.key))[2] >= 2:
            keys.append(key)
    return keys


def main() -> None:
    from harness import fastest, gpu_name, time_candidates
    from theodolite.results import load_results

    every = "--all" in sys.argv
    rows = {int(m) for m in sys.argv[sys.argv.index("--m") + 1].split(",")} if "--m" in sys.argv else None
    gpu = gpu_name()
    todo = []
    for suite in ("llm",) if rows else ("llm", "random-dev"):
        for s in load_results(f"reports/results/validate-{suite}-{gpu}.json").shapes:
            if rows is not None and s.M not in rows:
                continue
            extra = candidates(s, every or rows is not None, resident)
            if extra:
                todo.append((f"{suite}:{s.name}", s.M, s.N, s.K, fastest(s.configs, 3), extra))
    script = "tma_streamk.py" + " --all" * every + (f" --m {sys.argv[sys.argv.index('--m') + 1]}" if rows else "")
    path = time_candidates(todo, "tma split tail", f"tma-streamk-{gpu}", script, plans_for)
    print("wrote", path, file=sys.stderr)


if __name__ == "__main__":
    main()
