"""Selection-speed benchmark (``python -m theodolite select --benchmark``): medians on this CPU.

- first selection in a process: builds the profile's config table and the candidate grid of one
  alignment class (each further alignment class, e.g. misaligned operands, builds its own grid once);
- new shape: ``select`` on shapes it has not seen (log-uniform 1..16384 per dimension, random
  alignment), after a warm-up that builds the per-profile tables; three rounds of fresh shapes, the best
  round's median reported with the worst beside it (a shared host slows whole stretches of a run);
- repeated shape: ``select`` on a shape already selected (the cache);
- matmul overhead: ``theodolite.matmul`` minus calling the kernel launcher directly with the
  chosen config (the launcher itself is replaced by a stub, so this measures our host code only,
  and runs on a CPU).
"""

from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

from theodolite.profile.schema import Profile


def _shapes(count: int, seed: int) -> list[tuple[int, int, int]]:
    rng = random.Random(seed)
    top = math.log(16384)
    return [tuple(int(math.exp(rng.uniform(0, top))) for _ in range(3)) for _ in range(count)]  # type: ignore[misc]


def _host_reference_us() -> float:
    """Microseconds of ``sum(range(1000))`` (best of 5 x 2000): how fast this host runs plain Python right now, so
    selection times from different hosts (or stretches of a shared one) can be compared."""
    clock = time.perf_counter
    best = math.inf
    for _ in range(5):
        t0 = clock()
        for _ in range(2000):
            sum(range(1000))
        best = min(best, clock() - t0)
    return best / 2000 * 1e6


def _median_us(samples: list[float]) -> float:
    return statistics.median(samples) * 1e6


def measure(
    profile: Profile | None = None, count: int = 2000, seed: int = 20261123, rounds: int = 3
) -> dict[str, float]:
    """Median microseconds: first selection of a new shape (the best of ``rounds`` rounds of ``count`` shapes),
    repeated selection, matmul host overhead; and the host's speed at plain Python (``host_reference_us``)."""
    from theodolite import api
    from theodolite.profile.datasheet import h100_sxm

    prof = profile if profile is not None else h100_sxm()
    # the very first selection builds the profile's config table and one alignment class's candidate grid
    # (an empty grid cache: what a new profile or new code costs), then again as a later process finds the
    # grid on disk (model.grid_cache); both in a throwaway cache folder
    import os
    import tempfile
    from unittest import mock

    from theodolite.model.predict import clear_tables

    def first_selection() -> float:
        clear_tables()  # tables, alignment classes, routes and api's caches
        t0 = time.perf_counter()
        api.select(4096, 4096, 4096, profile=prof)
        return time.perf_counter() - t0

    with tempfile.TemporaryDirectory() as folder, mock.patch.dict(os.environ, {"THEODOLITE_CACHE_DIR": folder}):
        os.environ.pop("THEODOLITE_GRID_CACHE", None)
        first_ever = first_selection()
        first_cached = first_selection()
    # warm-up: tables and candidate grids of the common alignment classes
    for m, n, k in _shapes(200, seed + 1):
        api.select(m, n, k, profile=prof)
    clock = time.perf_counter
    # rounds of shapes never selected before (each round its own shapes): a shared host slows whole stretches of a
    # run, so the headline is the best round's median (as timeit reports the best of its repeats), the spread beside
    round_medians = []
    new: list[float] = []
    host = []
    for r in range(rounds):
        samples = []
        for m, n, k in _shapes(count, seed + 1000 * r):
            t0 = clock()
            api.select(m, n, k, profile=prof)
            samples.append(clock() - t0)
        round_medians.append(_median_us(samples))
        new.extend(samples)
        host.append(_host_reference_us())
    again = []
    for m, n, k in _shapes(200, seed)[:200]:
        for _ in range(5):
            t0 = clock()
            api.select(m, n, k, profile=prof)
            again.append(clock() - t0)
    result = {"new_shape_us": min(round_medians), "new_shape_worst_round_us": max(round_medians),
              "new_shape_p90_us": statistics.quantiles(new, n=10)[-1] * 1e6, "host_reference_us": min(host),
              "repeated_us": _median_us(again), "first_in_process_s": first_ever,
              "first_in_process_cached_s": first_cached}  # fmt: skip
    result.update(_matmul_overhead(prof))
    return result


def _matmul_overhead(prof: Profile) -> dict[str, float]:
    """matmul() vs the launcher alone; the launcher is a stub so only host code is timed."""
    try:
        import torch

        from theodolite import api, kernels
    except ImportError:  # pragma: no cover
        return {}
    a = torch.randn(512, 256, dtype=torch.bfloat16)
    b = torch.randn(256, 1024, dtype=torch.bfloat16)
    calls: list[Any] = []
    real = getattr(kernels, "gemm", None)

    def stub(a: Any, b: Any, config: Any, **kwargs: Any) -> Any:
        calls.append(config)
        return None

    try:
        kernels.gemm = stub  # type: ignore[attr-defined]
        config = api.select(512, 1024, 256, profile=prof).config

        def direct() -> None:
            kernels.gemm(a, b, config, num_sms=132)  # type: ignore[attr-defined]

        def wrapped() -> None:
            api.matmul(a, b, profile=prof)

        try:
            wrapped()
        except Exception as error:  # noqa: BLE001 - problem_of may be missing before the kernels land
            return {"matmul_overhead_us": math.nan, "matmul_error": str(error)}  # type: ignore[dict-item]
        t_direct = _repeat(direct)
        t_wrapped = _repeat(wrapped)
    finally:
        if real is not None:
            kernels.gemm = real  # type: ignore[attr-defined]
        else:
            del kernels.gemm  # type: ignore[attr-defined]
    return {"matmul_overhead_us": t_wrapped - t_direct}


def _repeat(fn: Callable[[], None], count: int = 3000) -> float:
    clock = time.perf_counter
    samples = []
    for _ in range(count):
        t0 = clock()
        fn()
        samples.append(clock() - t0)
    return _median_us(samples)


def main(profile: str | None = None) -> int:
    from theodolite.api import resolve

    prof = resolve(profile)  # None: the resolution order (the bundled H100 profile on a CPU machine)
    result = measure(prof)
    print(f"selection speed on this CPU, profile {prof.device_name} ({prof.provenance.source}):")
    print(f"  first selection of a new shape: median {result['new_shape_us']:.1f} us, best of 3 rounds "
          f"(worst round {result['new_shape_worst_round_us']:.1f} us; p90 {result['new_shape_p90_us']:.1f} us; "
          "target < 20)")  # fmt: skip
    print(
        f"  first selection in a process (builds the table and a candidate grid): {result['first_in_process_s']:.2f} s"
        f", {result['first_in_process_cached_s']:.2f} s with the grid on disk (model.grid_cache)"
    )
    print(f"  repeated shape (cache):         median {result['repeated_us']:.2f} us (target < 2)")
    if "matmul_overhead_us" in result:
        print(f"  matmul host overhead over gemm: median {result['matmul_overhead_us']:.2f} us (target < 10)")
    print(f"  this host's plain-Python speed: sum(range(1000)) {result['host_reference_us']:.1f} us (best of 5)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
