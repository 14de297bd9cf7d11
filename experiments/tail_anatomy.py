"""Where a split Stream-K tail's time goes, on the TMA kernel of ``tma_streamk.py``.

On dev124 768x3200x4224, 128x128 TMA tiles at 4-6 stages (one program per SM) run one full wave of 132 tiles in ~26-28
us (the data-parallel configs read 51.5-56.5 us for two waves), yet the split tail that adds 18 tiles in 7 K-slices of
~9 steps each read 43.9 us in all: ~16 us for ~4 us of K-steps.  A measurement of 2026-11-26 saw the same (each round of
slices cost 12-15 us beyond its K-steps, ``streamk_rounds.py``).  This times the parts, beside the sweep's three
fastest and torch.matmul as ``validate`` times a shape, per TMA tile whose tail the policy splits
(``anat/<tile>/<mode>``):

- ``full``: the kernel as ``tma_streamk.py`` runs it (policy split; each slice reduces row chunks after a spin-wait);
- ``dp``: the data-parallel tiles only (split 0: no tail; the output is incomplete, so unchecked);
- ``store``: the tail's K-steps and partial stores, no reduction (unchecked);
- ``nowait``: the reduction without the spin-wait (every slice sums its row chunks at once: wrong sums, unchecked);
- ``unroll``: ``full`` with the loop over a chunk's partials unrolled to TAIL_MAX_SPLIT masked loads (one round trip);
- ``last``: the last slice to arrive reduces the whole tile (no spin-wait);
- ``sN``: the tail forced to N slices (spin-wait), for N below the policy's.

Run on a GPU from the repository root (writes ``$OUT/tail-anatomy-<gpu>.json``)::

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/tail_anatomy.py [NAME ...]
"""

import functools
import sys
from typing import Any

import triton
import triton.language as tl
from harness import copy_jit
from theodolite.kernels.config import TAIL_MAX_SPLIT
from theodolite.kernels.epilogue import epilogue
from tma_streamk import partition, resident, tma_streamk_kernel
from tma_streamk import plans_for as split_tail_plans

UNCHECKED = ("dp", "store", "nowait")
MAX_SPLIT = tl.constexpr(TAIL_MAX_SPLIT)
DEFAULT_SHAPES = ("dev124", "llama3-70b.qkv", "llama3-8b.qkv", "dev132")


@triton.jit
def _store_partial(acc, ws_ptr, rel, j, split, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Slice j's fp32 partial of tile rel to the workspace, as ``streamk._reduce_slices`` stores it; the tile's base."""
    base = ws_ptr + rel.to(tl.int64) * split * (BLOCK_M * BLOCK_N)
    r = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    tl.store(base + j * (BLOCK_M * BLOCK_N) + r, acc)
    return base


@triton.jit
def _store_only(
    acc, ws_ptr, lock_ptr, rel, j, split, out_ptr, c_ptr, bias_ptr, scale_ptr, scale2_ptr, bid, pid_m, pid_n, M, N,
    stride_ob, stride_om, stride_on, stride_cb, stride_cm, stride_cn, alpha, beta,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HAS_C: tl.constexpr, BIAS_MODE: tl.constexpr,
    HAS_SCALE: tl.constexpr, OUT_VEC: tl.constexpr, C_VEC: tl.constexpr, N_VEC: tl.constexpr,
    CHUNKS: tl.constexpr, SPIN: tl.constexpr,
):  # fmt: skip
    """The partial's store and nothing after it (``streamk._reduce_slices``'s first step)."""
    _store_partial(acc, ws_ptr, rel, j, split, BLOCK_M, BLOCK_N)


@triton.jit
def _reduce_no_wait(
    acc, ws_ptr, lock_ptr, rel, j, split, out_ptr, c_ptr, bias_ptr, scale_ptr, scale2_ptr, bid, pid_m, pid_n, M, N,
    stride_ob, stride_om, stride_on, stride_cb, stride_cm, stride_cn, alpha, beta,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HAS_C: tl.constexpr, BIAS_MODE: tl.constexpr,
    HAS_SCALE: tl.constexpr, OUT_VEC: tl.constexpr, C_VEC: tl.constexpr, N_VEC: tl.constexpr,
    CHUNKS: tl.constexpr, SPIN: tl.constexpr,
):  # fmt: skip
    """``streamk._reduce_slices``'s spin path without its counter and wait: the store, then this slice's row chunks."""
    tile_elems: tl.constexpr = BLOCK_M * BLOCK_N
    base = _store_partial(acc, ws_ptr, rel, j, split, BLOCK_M, BLOCK_N)
    tl.debug_barrier()
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


@triton.jit
def _reduce_unrolled(
    acc, ws_ptr, lock_ptr, rel, j, split, out_ptr, c_ptr, bias_ptr, scale_ptr, scale2_ptr, bid, pid_m, pid_n, M, N,
    stride_ob, stride_om, stride_on, stride_cb, stride_cm, stride_cn, alpha, beta,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HAS_C: tl.constexpr, BIAS_MODE: tl.constexpr,
    HAS_SCALE: tl.constexpr, OUT_VEC: tl.constexpr, C_VEC: tl.constexpr, N_VEC: tl.constexpr,
    CHUNKS: tl.constexpr, SPIN: tl.constexpr,
):  # fmt: skip
    """``streamk._reduce_slices``'s spin path with the loop over slices unrolled to TAIL_MAX_SPLIT masked loads, so a
    chunk's partials are read in one round trip instead of ``split`` (the same slice order of the sum)."""
    tile_elems: tl.constexpr = BLOCK_M * BLOCK_N
    base = _store_partial(acc, ws_ptr, rel, j, split, BLOCK_M, BLOCK_N)
    tl.debug_barrier()
    arrived = tl.atomic_add(lock_ptr + rel, 1, sem="acq_rel", scope="gpu")
    seen = arrived + 1
    while seen < split:
        seen = tl.atomic_add(lock_ptr + rel, 0, sem="acquire", scope="gpu")
    ROWS: tl.constexpr = BLOCK_M // CHUNKS
    rc = tl.arange(0, ROWS)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    for chunk in range(j, CHUNKS, split):
        total = tl.zeros((ROWS, BLOCK_N), dtype=tl.float32)
        for i in tl.static_range(MAX_SPLIT):
            total += tl.load(base + i * tile_elems + chunk * (ROWS * BLOCK_N) + rc, mask=(rc >= 0) & (i < split),
                             other=0.0, cache_modifier=".cg")  # fmt: skip
        epilogue(
            total, out_ptr, c_ptr, bias_ptr, scale_ptr, scale2_ptr, bid, pid_m * CHUNKS + chunk, pid_n, M, N,
            stride_ob, stride_om, stride_on, stride_cb, stride_cm, stride_cn, alpha, beta,
            ROWS, BLOCK_N, HAS_C, BIAS_MODE, HAS_SCALE, OUT_VEC, C_VEC, N_VEC,
        )  # fmt: skip
    left = tl.atomic_add(lock_ptr + rel, 1, sem="relaxed", scope="gpu")
    if left == 2 * split - 1:
        tl.atomic_xchg(lock_ptr + rel, 0, sem="relaxed", scope="gpu")


@functools.cache
def variant_kernel(name: str) -> Any:
    """The split-tail kernel with its reduction replaced (``store``, ``nowait``, ``unroll``)."""
    swap = {"store": _store_only, "nowait": _reduce_no_wait, "unroll": _reduce_unrolled}[name]
    return copy_jit(tma_streamk_kernel, {"_reduce_slices": swap})


def plans_for(sets: list[tuple[Any, Any, Any]], key: str, _extra: Any = None) -> list[Any]:
    """Each set's plan of ``anat/<tile>/<mode>``: ``tma_streamk.py``'s split-tail plan, its launch changed per mode."""
    head, mode = key.rsplit("/", 1)
    plans = split_tail_plans(sets, "tmask/" + head.split("/", 1)[1])
    for plan in plans:
        step = plan.steps[-1]
        if mode == "dp":
            step.kwargs["split"] = 0
        elif mode in ("store", "nowait", "unroll"):
            step.kernel = variant_kernel(mode)
        elif mode == "last":
            step.kwargs["SPIN"] = False
        elif mode.startswith("s"):
            forced = int(mode[1:])
            if not 2 <= forced < step.kwargs["split"]:
                raise ValueError(f"{key}: split {forced} not below the policy's {step.kwargs['split']}")
            step.kwargs["split"] = forced
        elif mode != "full":
            raise ValueError(f"unknown mode {mode!r}")
    return plans


def candidates(m: int, n: int, k: int) -> list[str]:
    """``anat/<tile>/<mode>`` for the TMA tiles of the space (unflattened) whose tail the policy splits."""
    from theodolite.kernels.config import config_space

    keys = []
    for c in config_space("bf16", ("tma",)):
        tile = c.key.split("/", 1)[1].removesuffix("/f")
        tiles, dp, split = partition(m, n, k, c.key, resident(c.key))
        if split < 2 or f"anat/{tile}/full" in keys:
            continue
        modes = ["full", "unroll", "dp", "store", "nowait", "last"] + [f"s{s}" for s in (2, 3, 4) if s < split]
        keys += [f"anat/{tile}/{mode}" for mode in modes]
    return keys


def main() -> None:
    import torch
    from harness import (
        add_runs,
        fastest,
        first_right,
        gpu_name,
        in_workers,
        time_as_validate,
        validate_inputs,
        warm,
        warm_plans,
        write_rows,
    )
    from theodolite.kernels.benchmark import Timer

    from theodolite.results import load_results

    names = sys.argv[1:] or list(DEFAULT_SHAPES)
    gpu = gpu_name()
    todo = []
    for suite in ("llm", "random-dev"):
        for s in load_results(f"reports/results/validate-{suite}-{gpu}.json").shapes:
            if s.name in names and s.M >= 256 and s.M * s.N * s.K <= 2**36 and s.N % 8 == 0 and s.K % 8 == 0:
                extra = candidates(s.M, s.N, s.K)
                if extra:
                    todo.append((f"{suite}:{s.name}", s.M, s.N, s.K, fastest(s.configs, 3), extra))
    tasks = sorted({(m, n, k, key, False) for _, m, n, k, best, _ in todo for key in best})
    print("warmed", sum(in_workers(warm, tasks)), "of", len(tasks), flush=True)
    swapped = sorted({(m, n, k, key, None) for _, m, n, k, _, extra in todo for key in extra})
    print("warmed", sum(in_workers(functools.partial(warm_plans, plans_for=plans_for), swapped)), "candidates")
    timer = Timer()
    rows = []
    for name, m, n, k, best, extra in todo:
        inputs, sets, calls = validate_inputs(m, n, k, timer)
        ref = inputs.ref.float()
        add_runs(calls, sets, best, ref)
        for key in extra:
            try:
                plans = plans_for(sets, key)
            except ValueError as error:
                print(name, key, "skipped:", error, flush=True)
                continue
            if key.rsplit("/", 1)[1] in UNCHECKED:
                plans[0].run()
            elif not first_right(plans, sets[0][2], ref, name, key):
                continue
            calls[key] = [p.run for p in plans]
        torch.cuda.synchronize()
        times = time_as_validate(timer, inputs, calls)
        for c, t in times.items():
            rows.append({"shape": name, "M": m, "N": n, "K": k, "config": c, "us": t * 1e3, "sweep": c in best})
        old = min(times[c] for c in best if c in times)
        print(f"{name} {m}x{n}x{k}: torch {times['torch'] * 1e3:.2f} us, sweep best {old * 1e3:.2f}", flush=True)
        tiles = sorted({c.rsplit("/", 1)[0] for c in extra})
        for tile in tiles:
            parts = {c.rsplit("/", 1)[1]: t * 1e3 for c, t in times.items() if c.rsplit("/", 1)[0] == tile}
            print("   ", tile, " ".join(f"{mode}={us:.1f}" for mode, us in parts.items()), flush=True)
    command = "PYTHONPATH=$PWD OUT=$OUT python3 experiments/tail_anatomy.py " + " ".join(names)
    print("wrote", write_rows(f"tail-anatomy-{gpu}", command, rows), file=sys.stderr)


if __name__ == "__main__":
    main()
