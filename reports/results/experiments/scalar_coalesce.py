"""Element-wise B loads laid along N (coalesced) or along K, as Triton 3.6 chose: does it pay?

An operand read element-wise (``A_VEC``/``B_VEC`` 1) is addressed by int32 offsets clamped at the matrix edge
(``kernels.epilogue.SCALAR_OFFSETS``).  The clamp hides the offsets' contiguity from Triton's coalescing pass, which
then breaks the tie between the two dimensions by laying a warp's 32 threads along the tile's first one: for B [K, N]
row-major (the nn and tn layouts) that is K, so each warp load touched 32 rows, two bytes from each (the TTGIR of
``splitk/64x64x128`` "scalar", nn: ``threadsPerWarp = [32, 1], order = [0, 1]`` for the 128x64 B tile).
``kernels.epilogue.SCALAR_COALESCE`` declares the clamped offsets contiguous along N (``tl.max_contiguous``), and the
threads go along the row (``[1, 32], order = [1, 0]``).  A column-major A came out along M by that tie-break already.

This times, for every random-dev shape whose binary reads B element-wise, the sweep's six fastest non-TMA configs both
ways in one process (the kernels copied with the switch flipped: ``harness.switched_plans``), beside torch.matmul, as
``theodolite validate`` times a shape, and prints each way's best against torch.  Run on a GPU from the repository
root (writes ``$OUT/scalar-coalesce-<gpu>.json``)::

    PYTHONPATH=$PWD OUT=$OUT python3 reports/results/experiments/scalar_coalesce.py
"""

import sys

PER_SHAPE = 6


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
    from harness import gpu_name, time_switch

    gpu = gpu_name()
    todo = shapes(gpu)
    if len(sys.argv) > 1:
        todo = todo[: int(sys.argv[1])]
    time_switch(todo, "SCALAR_COALESCE", ("along-k", "coalesced"), f"scalar-coalesce-{gpu}", "scalar_coalesce.py")


if __name__ == "__main__":
    main()
