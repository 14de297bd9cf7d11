"""Element-wise operands addressed by int32 offsets instead of a 64-bit pointer per element: does it pay?

A misaligned operand that cannot take 4- or 8-byte vectors is read element-wise (``A_VEC``/``B_VEC`` 1).  Its loads
had a 64-bit pointer per element, carried across the K loop and advanced every step: two registers per loaded
element, which put the element-wise builds at 240-255 registers, some spilling (thirteenth session, "Element-wise
loads one K-step ahead").  ``kernels.epilogue.SCALAR_OFFSETS`` addresses them instead by int32 offsets inside the
tile (one register each, loop-invariant) from a scalar base that walks K; rows/columns past the edge are clamped to
the last one instead of wrapped (loaded, never stored), so the offsets stay inside the tile.

This times, for every random-dev shape whose binary reads an operand element-wise, the sweep's six fastest configs
both ways in one process (the kernels copied with the switch flipped: ``variant_kernels``), beside torch.matmul, as
``theodolite validate`` times a shape, and prints each way's best against torch.  Run on a GPU from the repository
root (writes ``$OUT/scalar-offsets-<gpu>.json``)::

    PYTHONPATH=$PWD OUT=$OUT python3 reports/results/experiments/scalar_offsets.py
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


def variant_kernels(offsets: bool) -> dict[Any, Any]:
    """{shipped kernel: its copy with ``SCALAR_OFFSETS`` = ``offsets``} for the persistent, Stream-K and split-K
    kernels."""
    import triton.language as tl
    from theodolite.kernels import epilogue, persistent, splitk, streamk

    mma = _copy_jit(epilogue.mma_tile, {"SCALAR_OFFSETS": tl.constexpr(offsets)})
    return {k: _copy_jit(k, {"mma_tile": mma}) for k in (persistent.persistent_kernel, streamk.streamk_kernel,
                                                         splitk.splitk_kernel)}  # fmt: skip


KERNELS: dict[bool, dict[Any, Any]] = {}


def plans_of(sets: list[Any], key: str, offsets: bool) -> list[Any]:
    """Each (A, B, out) set's plan of config ``key`` with the kernels of the ``offsets`` way."""
    from theodolite.kernels.config import GemmConfig
    from theodolite.kernels.launch import plan_gemm

    if offsets not in KERNELS:
        KERNELS[offsets] = variant_kernels(offsets)
    plans = [plan_gemm(x, y, GemmConfig.from_key(key), out=o) for x, y, o in sets]
    for plan in plans:
        for step in plan.steps:
            if getattr(step, "kernel", None) in KERNELS[offsets]:
                step.kernel = KERNELS[offsets][step.kernel]
    return plans


def shapes(gpu: str) -> list[tuple[str, int, int, int, str, list[str]]]:
    """(name, M, N, K, load class, the sweep's fastest configs) of the random-dev shapes read element-wise."""
    from harness import fastest
    from theodolite.kernels.config import Problem, needs_aligned_copy, operand_loads
    from theodolite.results import load_results

    out = []
    for s in load_results(f"reports/results/validate-random-dev-{gpu}.json").shapes:
        problem = Problem(s.M, s.N, s.K)
        loads = operand_loads(problem)
        if loads.startswith("scalar") and not any(needs_aligned_copy(problem)):
            keys = [c for c in fastest(s.configs, 3 * PER_SHAPE) if not c.startswith("tma/")][:PER_SHAPE]
            out.append((s.name, s.M, s.N, s.K, loads, keys))
    return out


def main() -> None:
    import torch
    from harness import best_by_way, first_right, gpu_name, in_workers, time_as_validate, validate_inputs, warm_plans
    from harness import way_rows, write_rows
    from theodolite.kernels.benchmark import Timer

    gpu = gpu_name()
    todo = shapes(gpu)
    if len(sys.argv) > 1:
        todo = todo[: int(sys.argv[1])]
    tasks = sorted({(m, n, k, key, offsets) for _, m, n, k, _, keys in todo for key in keys for offsets in (False, True)})
    print("warmed", sum(in_workers(functools.partial(warm_plans, plans_for=plans_of), tasks)), "shapes", len(todo),
          flush=True)  # fmt: skip
    timer = Timer()
    rows, ratios = [], []
    for name, m, n, k, loads, keys in todo:
        inputs, sets, calls = validate_inputs(m, n, k, timer)
        ref = inputs.ref.float()
        for key in keys:
            for offsets in (False, True):
                plans = plans_of(sets, key, offsets)
                if first_right(plans, sets[0][2], ref, name, key, offsets):
                    calls[f"{key}@{'offsets' if offsets else 'pointers'}"] = [p.run for p in plans]
        torch.cuda.synchronize()
        times = time_as_validate(timer, inputs, calls)
        rows += way_rows(name, m, n, k, times, loads=loads)
        best = best_by_way(times, ("pointers", "offsets"))
        ratios.append(best["pointers"] / best["offsets"])
        print(f"{name} {m}x{n}x{k} {loads}: torch {times['torch'] * 1e3:.2f} us, best pointers "
              f"{best['pointers'] * 1e3:.2f} (x{times['torch'] / best['pointers']:.3f}), offsets {best['offsets'] * 1e3:.2f} "
              f"(x{times['torch'] / best['offsets']:.3f})", flush=True)  # fmt: skip
    if ratios:
        print(f"best pointers / best offsets, geomean over {len(ratios)} shapes: "
              f"{math.exp(sum(map(math.log, ratios)) / len(ratios)):.3f}", flush=True)  # fmt: skip
    command = "PYTHONPATH=$PWD OUT=$OUT python3 reports/results/experiments/scalar_offsets.py"
    print("wrote", write_rows(f"scalar-offsets-{gpu}", command, rows), file=sys.stderr)


if __name__ == "__main__":
    main()
