"""What a split-K tile's reduction costs, and whether a faster one pays: the shipped kernel against variants.

``kernels/splitk.py`` reduces a tile in one launch: each of its ``split_k`` programs stores an fp32 partial and counts
itself in; the last to arrive adds all the partials in slice order (a loop, one partial per trip) and applies the
epilogue.  The model prices that reduction as the partials' bytes at ``model_splitk_reduce_cost`` times one SM's
bandwidth.  Its residuals say split-K configs near the sweep's best run slower than predicted, more so with deeper
splits and wider tiles (``model_checks.py splitk-pairs``).  This times, on every shape of both suites where a split-K
config is within 1.15x of the sweep's best, its three fastest split-K configs with four kernels swapped in for the
shipped one (same signature, same launch):

- ``ship``: the shipped kernel;
- ``none``: no reduction (the last slice to arrive writes its own partial: a wrong result, timed only, so that
  ``ship`` minus ``none`` is what the reduction costs);
- ``unroll4``: the shipped reduction with its loop over the partials unrolled 4 times (four loads in flight);
- ``coop``: every slice waits for the tile's others, then reduces its share of the tile's row chunks in slice order
  (the Stream-K tail's ``_reduce_slices``); needs all programs resident at once, so only where the grid is at most
  one program per SM;

beside the sweep's fastest other config and torch.matmul, side by side as ``theodolite validate`` times a shape.
Run on a GPU from the repository root (writes ``$OUT/splitk-reduce-<gpu>.json``, prints a table)::

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/splitk_reduce.py
"""

import functools
import math
import sys

import triton
import triton.language as tl
from theodolite.kernels.epilogue import epilogue, mma_tile, store_partial, sum_partials, tile_coords
from theodolite.kernels.persistent import RUNTIME_INTS
from theodolite.kernels.streamk import _reduce_slices

VARIANTS = ("ship", "none", "unroll4", "coop")
NEAR_BEST = 1.15  # shapes where a split-K config is within this of the sweep's best
PER_SHAPE = 3  # split-K configs timed per shape (the sweep's fastest)


@triton.jit
def _sum_unrolled(ws_ptr, first, count, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    r = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    base = ws_ptr + tl.cast(first, tl.int64) * (BLOCK_M * BLOCK_N)
    total = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for i in tl.range(count, loop_unroll_factor=4):
        total += tl.load(base + i * (BLOCK_M * BLOCK_N) + r, cache_modifier=".cg")
    return total


@triton.jit(do_not_specialize=RUNTIME_INTS)
def splitk_variant(
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
    OUT_VEC: tl.constexpr, C_VEC: tl.constexpr, N_VEC: tl.constexpr, VARIANT: tl.constexpr,
):  # fmt: skip
    """``kernels.splitk.splitk_kernel`` with its reduction chosen by VARIANT (1 none, 2 unroll4, 3 coop)."""
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
    if VARIANT == 3:
        _reduce_slices(
            acc, ws_ptr, lock_ptr, tile, s, SPLIT_K, out_ptr, c_ptr, bias_ptr, scale_ptr, scale2_ptr, bid, pid_m, pid_n, M, N,
            stride_ob, stride_om, stride_on, stride_cb, stride_cm, stride_cn, alpha, beta,
            BLOCK_M, BLOCK_N, HAS_C, BIAS_MODE, HAS_SCALE, OUT_VEC, C_VEC, N_VEC, 8, True,
        )  # fmt: skip
    else:
        store_partial(acc, ws_ptr, tile.to(tl.int64) * SPLIT_K + s, BLOCK_M, BLOCK_N)
        tl.debug_barrier()
        arrived = tl.atomic_add(lock_ptr + tile, 1, sem="acq_rel", scope="gpu")
        if arrived == SPLIT_K - 1:
            if VARIANT == 1:
                total = acc
            elif VARIANT == 2:
                total = _sum_unrolled(ws_ptr, tile.to(tl.int64) * SPLIT_K, SPLIT_K, BLOCK_M, BLOCK_N)
            else:
                total = sum_partials(ws_ptr, tile.to(tl.int64) * SPLIT_K, SPLIT_K, BLOCK_M, BLOCK_N)
            tl.atomic_xchg(lock_ptr + tile, 0, sem="relaxed", scope="gpu")
            epilogue(
                total, out_ptr, c_ptr, bias_ptr, scale_ptr, scale2_ptr, bid, pid_m, pid_n, M, N,
                stride_ob, stride_om, stride_on, stride_cb, stride_cm, stride_cn, alpha, beta,
                BLOCK_M, BLOCK_N, HAS_C, BIAS_MODE, HAS_SCALE, OUT_VEC, C_VEC, N_VEC,
            )  # fmt: skip


def _plans(sets, key: str, variant: str):  # type: ignore[no-untyped-def]
    """Each (A, B, out) set's plan of split-K config ``key`` with the kernel of ``variant``."""
    import theodolite.kernels.splitk as splitk_module
    from theodolite.kernels.config import GemmConfig
    from theodolite.kernels.launch import plan_gemm

    plans = [plan_gemm(x, y, GemmConfig.from_key(key), out=o) for x, y, o in sets]
    if variant != "ship":
        for plan in plans:
            step = plan.steps[-1]
            assert step.kernel is splitk_module.splitk_kernel, step.kernel
            step.kernel = splitk_variant
            step.kwargs = {**step.kwargs, "VARIANT": VARIANTS.index(variant)}
    return plans


def one_wave(m: int, n: int, key: str) -> bool:
    """Whether config ``key``'s grid on an M x N output is at most one program per SM (``coop`` needs all resident)."""
    import torch
    from theodolite.kernels.config import GemmConfig

    c = GemmConfig.from_key(key)
    sm = torch.cuda.get_device_properties(0).multi_processor_count
    return math.ceil(m / c.block_m) * math.ceil(n / c.block_n) * c.split_k <= sm


def shapes(gpu: str) -> list[tuple[str, int, int, int, list[str], list[str]]]:
    """(suite:name, M, N, K, the sweep's fastest split-K configs, its fastest other config)."""
    from harness import fastest
    from theodolite.results import load_results

    out = []
    for suite in ("random-dev", "llm"):
        for s in load_results(f"reports/results/validate-{suite}-{gpu}.json").shapes:
            ranked = fastest(s.configs, len(s.configs))
            timed = {c: float(s.configs[c] or math.inf) for c in ranked}
            best = timed[ranked[0]]
            split = [c for c in ranked if c.startswith("splitk/") and timed[c] < NEAR_BEST * best][:PER_SHAPE]
            if split:
                other = [c for c in ranked if not c.startswith("splitk/")][:1]
                out.append((f"{suite}:{s.name}", s.M, s.N, s.K, split, other))
    return out


def main() -> None:
    import torch
    from harness import (add_runs, first_right, gpu_name, in_workers, time_as_validate, validate_inputs, warm,
                         warm_plans, write_rows)  # fmt: skip
    from theodolite.kernels.benchmark import Timer

    gpu = gpu_name()
    todo = shapes(gpu)
    if len(sys.argv) > 1:
        todo = todo[: int(sys.argv[1])]
    plain = sorted({(m, n, k, key, False) for _, m, n, k, _, other in todo for key in other})
    variants = sorted({(m, n, k, key, v) for _, m, n, k, split, _ in todo for key in split for v in VARIANTS
                       if v != "coop" or one_wave(m, n, key)})  # fmt: skip
    warmed = sum(in_workers(functools.partial(warm_plans, plans_for=_plans), variants))
    print("warmed", sum(in_workers(warm, plain)), warmed, flush=True)
    timer = Timer()
    rows = []
    for name, m, n, k, split, other in todo:
        inputs, sets, calls = validate_inputs(m, n, k, timer)
        ref = inputs.ref.float()
        add_runs(calls, sets, other, ref)
        for key in split:
            for variant in VARIANTS:
                if variant == "coop" and not one_wave(m, n, key):
                    continue
                plans = _plans(sets, key, variant)
                if variant == "none":  # a wrong result by design: run, not checked
                    plans[0].run()
                elif not first_right(plans, sets[0][2], ref, name, key, variant):
                    continue
                calls[f"{key}@{variant}"] = [p.run for p in plans]
        torch.cuda.synchronize()
        times = time_as_validate(timer, inputs, calls)
        for c, t in times.items():
            key, _, variant = c.partition("@")
            rows.append({"shape": name, "M": m, "N": n, "K": k, "config": key, "variant": variant or "-",
                         "us": t * 1e3})  # fmt: skip
        line = " ".join(f"{c.split('/')[1]}/{c.split('/')[-1]}@{v}={times[c + '@' + v] * 1e3:.2f}"
                        for c in split for v in VARIANTS if c + "@" + v in times)  # fmt: skip
        print(f"{name} {m}x{n}x{k}: torch {times['torch'] * 1e3:.2f} other {min(times.get(c, 9) for c in other) * 1e3:.2f} "
              f"{line}", flush=True)  # fmt: skip
    command = "PYTHONPATH=$PWD OUT=$OUT python3 experiments/splitk_reduce.py"
    print("wrote", write_rows(f"splitk-reduce-{gpu}", command, rows), file=sys.stderr)


if __name__ == "__main__":
    main()
