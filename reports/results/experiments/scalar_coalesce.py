"""Element-wise B loads laid along N (coalesced) or along K, as Triton 3.6 chose: does it pay?

An operand read element-wise (``A_VEC``/``B_VEC`` 1) is addressed by int32 offsets clamped at the matrix edge
(``kernels.epilogue.SCALAR_OFFSETS``).  The clamp hides the offsets' contiguity from Triton's coalescing pass, which
then breaks the tie between the two dimensions by laying a warp's 32 threads along the tile's first one: for B [K, N]
row-major (the nn and tn layouts) that is K, so each warp load touched 32 rows, two bytes from each (the TTGIR of
``splitk/64x64x128`` "scalar", nn: ``threadsPerWarp = [32, 1], order = [0, 1]`` for the 128x64 B tile).
``kernels.epilogue.SCALAR_COALESCE`` declares the clamped offsets contiguous along N (``tl.max_contiguous``), and the
threads go along the row (``[1, 32], order = [1, 0]``).  A column-major A came out along M by that tie-break already.

This times, for every random-dev shape whose binary reads B element-wise, the sweep's six fastest non-TMA configs both
ways in one process (the kernels copied with the switch flipped: ``variant_kernels``), beside torch.matmul, as
``theodolite validate`` times a shape, and prints each way's best against torch.  Run on a GPU from the repository
root (writes ``$OUT/scalar-coalesce-<gpu>.json``)::

    PYTHONPATH=$PWD OUT=$OUT python3 reports/results/experiments/scalar_coalesce.py
"""

import functools
import math
import sys
import types
from typing import Any

PER_SHAPE = 6


def _copy_jit(jitted: Any, overrides: dict[str, Any]) -> Any:
    """A JIT function with the same code as ``jitted`` and its module's globals changed by ``overrides`` (its own
    caches; Triton's cache key holds the changed global constexprs)."""
    import triton

    fn = jitted.fn
    scope = dict(fn.__globals__)
    scope.update(overrides)
    copy = types.FunctionType(fn.__code__, scope, fn.__name__, fn.__defaults__, fn.__closure__)
    copy.__module__, copy.__qualname__, copy.__doc__ = fn.__module__, fn.__qualname__, fn.__doc__
    copy.__annotations__, copy.__kwdefaults__ = dict(fn.__annotations__), fn.__kwdefaults__  # constexpr parameters
    return triton.jit(copy, do_not_specialize=list(jitted.do_not_specialize or []))


def variant_kernels(coalesce: bool) -> dict[Any, Any]:
    """{shipped kernel: its copy with ``SCALAR_COALESCE`` = ``coalesce``} for the persistent, Stream-K and split-K
    kernels."""
    import triton.language as tl
    from theodolite.kernels import epilogue, persistent, splitk, streamk

    mma = _copy_jit(epilogue.mma_tile, {"SCALAR_COALESCE": tl.constexpr(coalesce)})
    return {k: _copy_jit(k, {"mma_tile": mma}) for k in (persistent.persistent_kernel, streamk.streamk_kernel,
                                                         splitk.splitk_kernel)}  # fmt: skip


KERNELS: dict[bool, dict[Any, Any]] = {}


def plans_of(sets: list[Any], key: str, coalesce: bool) -> list[Any]:
    """Each (A, B, out) set's plan of config ``key`` with the kernels of the ``coalesce`` way."""
    from theodolite.kernels.config import GemmConfig
    from theodolite.kernels.launch import plan_gemm

    if coalesce not in KERNELS:
        KERNELS[coalesce] = variant_kernels(coalesce)
    plans = [plan_gemm(x, y, GemmConfig.from_key(key), out=o) for x, y, o in sets]
    for plan in plans:
        for step in plan.steps:
            if getattr(step, "kernel", None) in KERNELS[coalesce]:
                step.kernel = KERNELS[coalesce][step.kernel]
    return plans


def shapes(gpu: str) -> list[tuple[str, int, int, int, str, list[str]]]:
    """(name, M, N, K, load class, the sweep's fastest configs) of the random-dev shapes whose B is read
    element-wise."""
    from harness import fastest
    from theodolite.kernels.config import Problem, needs_aligned_copy, operand_loads

    from theodolite.results import load_results

    out = []
    for s in load_results(f"reports/results/validate-random-dev-{gpu}.json").shapes:
        problem = Problem(s.M, s.N, s.K)
        loads = operand_loads(problem)
        if loads in ("scalar", "scalar-b") and not any(needs_aligned_copy(problem)):
            keys = [c for c in fastest(s.configs, 3 * PER_SHAPE) if not c.startswith("tma/")][:PER_SHAPE]
            out.append((s.name, s.M, s.N, s.K, loads, keys))
    return out


def main() -> None:
    import torch
    from harness import (
        best_by_way,
        first_right,
        gpu_name,
        in_workers,
        time_as_validate,
        validate_inputs,
        warm_plans,
        way_rows,
        write_rows,
    )
    from theodolite.kernels.benchmark import Timer

    gpu = gpu_name()
    todo = shapes(gpu)
    if len(sys.argv) > 1:
        todo = todo[: int(sys.argv[1])]
    tasks = sorted(
        {(m, n, k, key, coalesce) for _, m, n, k, _, keys in todo for key in keys for coalesce in (False, True)}
    )
    print("warmed", sum(in_workers(functools.partial(warm_plans, plans_for=plans_of), tasks)), "shapes", len(todo),
          flush=True)  # fmt: skip
    timer = Timer()
    rows, ratios = [], []
    for name, m, n, k, loads, keys in todo:
        inputs, sets, calls = validate_inputs(m, n, k, timer)
        ref = inputs.ref.float()
        for key in keys:
            for coalesce in (False, True):
                plans = plans_of(sets, key, coalesce)
                if first_right(plans, sets[0][2], ref, name, key, coalesce):
                    calls[f"{key}@{'coalesced' if coalesce else 'along-k'}"] = [p.run for p in plans]
        torch.cuda.synchronize()
        times = time_as_validate(timer, inputs, calls)
        rows += way_rows(name, m, n, k, times, loads=loads)
        best = best_by_way(times, ("along-k", "coalesced"))
        ratios.append(best["along-k"] / best["coalesced"])
        print(f"{name} {m}x{n}x{k} {loads}: torch {times['torch'] * 1e3:.2f} us, along K "
              f"{best['along-k'] * 1e3:.2f} (x{times['torch'] / best['along-k']:.3f}), coalesced "
              f"{best['coalesced'] * 1e3:.2f} "
              f"(x{times['torch'] / best['coalesced']:.3f})", flush=True)  # fmt: skip
    if ratios:
        print(f"best along K / best coalesced, geomean over {len(ratios)} shapes: "
              f"{math.exp(sum(map(math.log, ratios)) / len(ratios)):.3f}", flush=True)  # fmt: skip
    command = "PYTHONPATH=$PWD OUT=$OUT python3 reports/results/experiments/scalar_coalesce.py"
    print("wrote", write_rows(f"scalar-coalesce-{gpu}", command, rows), file=sys.stderr)


if __name__ == "__main__":
    main()
