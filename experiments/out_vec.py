"""Misaligned output rows: the epilogue's stores with contiguous columns promised (``OUT_VEC`` 1) or nothing (0).

``store_width.py`` found that with aligned operands (layout nt) an output whose N is not a multiple of 8 costs our
kernels up to 1.4x over the same product written column-major, and that rows padded to 16 bytes (``OUT_VEC`` 8 beside
a per-element mask) cost 2x: what the epilogue is promised changes how Triton lays out the stores, and the promise of
contiguous 2-byte-aligned columns is the slow one.  This times, on every random-dev shape whose N is not a multiple of
8, the sweep's three fastest configs as planned (``launch._row_vec`` -> 1) and with the promise withdrawn (0: strides
read at run time), beside torch.matmul, as ``validate`` times a shape.  Run on a GPU from the repository root (writes
``$OUT/out-vec-<gpu>.json``)::

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/out_vec.py
"""

import contextlib
import math
import sys
from collections.abc import Iterator
from typing import Any

WAYS = ("as-is", "vec0")  # --wide: ("as-is", "wide") on the shapes whose N is even


def _pow2_dividing(*values: int, top: int) -> int:
    bits = top
    for v in values:
        bits |= v
    return bits & -bits


def _wide_vecs(out3: Any, c3: Any, n: int) -> tuple[int, int, int]:
    """``launch._epilogue_vecs`` with partial vectors: the widest power of two (up to 16 bytes) dividing the output's
    row and batch strides and base address, and N, so an even N stores 4- or 8-byte vectors."""
    full = 16 // out3.element_size()
    if out3.stride(2) != 1 and n > 1:
        return 0, 0, 1
    rows = out3.stride(1) if out3.shape[1] > 1 else 0
    batches = out3.stride(0) if out3.shape[0] > 1 else 0
    vec = _pow2_dividing(rows, batches, out3.data_ptr() // out3.element_size(), n, top=full)
    return vec, 0 if c3 is None else 1, vec


@contextlib.contextmanager
def promise(way: str) -> Iterator[None]:
    """``launch``'s epilogue promises as shipped, or ``_row_vec`` returning 0 where it would return 1 ('vec0'), or
    partial vectors ('wide', no C)."""
    from theodolite.kernels import launch

    shipped, shipped_vecs = launch._row_vec, launch._epilogue_vecs
    if way == "vec0":
        launch._row_vec = lambda x, n: 0 if shipped(x, n) == 1 else shipped(x, n)  # type: ignore[assignment]
    if way == "wide":
        launch._epilogue_vecs = _wide_vecs  # type: ignore[assignment]
    try:
        yield
    finally:
        launch._row_vec, launch._epilogue_vecs = shipped, shipped_vecs  # type: ignore[assignment]


def plans(sets: list[Any], key: str, way: str) -> list[Any]:
    from theodolite.kernels.config import GemmConfig
    from theodolite.kernels.launch import plan_gemm

    with promise(way):
        return [plan_gemm(x, y, GemmConfig.from_key(key), out=o) for x, y, o in sets]


def warm(tasks: list[tuple[int, int, int, str, str]]) -> int:
    import torch
    from theodolite.kernels.benchmark import make_inputs
    from theodolite.kernels.config import ConfigError

    done = 0
    for m, n, k, key, way in tasks:
        a, b = make_inputs(m, n, k, "bf16", "nn", torch.device("cuda"))
        out = torch.empty((m, n), device="cuda", dtype=torch.bfloat16)
        try:
            plans([(a, b, out)], key, way)[0].run()
            done += 1
        except ConfigError:
            pass
    torch.cuda.synchronize()
    return done


def main() -> None:
    import torch
    from harness import best_by_way, fastest, first_right, gpu_name, in_workers, time_as_validate, validate_inputs
    from harness import way_rows, write_rows
    from theodolite.kernels.benchmark import Timer
    from theodolite.kernels.config import ConfigError
    from theodolite.results import load_results

    global WAYS
    wide = "--wide" in sys.argv[1:]
    if wide:
        WAYS = ("as-is", "wide")
    gpu = gpu_name()
    todo = [(s.name, s.M, s.N, s.K, fastest(s.configs, 3))
            for s in load_results(f"reports/results/validate-random-dev-{gpu}.json").shapes
            if s.N % 8 and not (wide and s.N % 2)]  # fmt: skip
    tasks = sorted({(m, n, k, key, way) for _, m, n, k, keys in todo for key in keys for way in WAYS})
    print("warmed", sum(in_workers(warm, tasks, workers=14)), "of", len(tasks), "shapes", len(todo), flush=True)
    timer = Timer()
    rows = []
    ratios = []
    for name, m, n, k, keys in todo:
        inputs, sets, calls = validate_inputs(m, n, k, timer)
        ref = inputs.ref.float()
        for key in keys:
            for way in WAYS:
                try:
                    p = plans(sets, key, way)
                except ConfigError:
                    continue
                if first_right(p, sets[0][2], ref, name, key, way):
                    calls[f"{key}@{way}"] = [q.run for q in p]
        torch.cuda.synchronize()
        times = time_as_validate(timer, inputs, calls)
        rows += way_rows(name, m, n, k, times)
        best = best_by_way(times, WAYS)
        other = WAYS[1]
        ratios.append(best["as-is"] / best[other])
        print(f"{name} {m}x{n}x{k}: torch {times['torch'] * 1e3:.2f} us, as-is {best['as-is'] * 1e3:.2f} "
              f"(x{times['torch'] / best['as-is']:.3f}), {other} {best[other] * 1e3:.2f} "
              f"(x{times['torch'] / best[other]:.3f})", flush=True)  # fmt: skip
    geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
    print(f"best as-is / best {other} over {len(ratios)} shapes: geomean {geo:.3f}, min {min(ratios):.3f}, "
          f"max {max(ratios):.3f}", flush=True)  # fmt: skip
    command = "PYTHONPATH=$PWD OUT=$OUT python3 experiments/out_vec.py" + (" --wide" if wide else "")
    print("wrote", write_rows(f"out-vec{'-wide' if wide else ''}-{gpu}", command, rows), file=sys.stderr)


if __name__ == "__main__":
    main()
