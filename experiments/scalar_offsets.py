"""Element-wise operands addressed by int32 offsets instead of a 64-bit pointer per element: does it pay?

A misaligned operand that cannot take 4- or 8-byte vectors is read element-wise (``A_VEC``/``B_VEC`` 1).  Its loads
had a 64-bit pointer per element, carried across the K loop and advanced every step: two registers per loaded
element, which put the element-wise builds at 240-255 registers, some spilling (measured 2026-11-23, "Element-wise
loads one K-step ahead").  ``kernels.epilogue.SCALAR_OFFSETS`` addresses them instead by int32 offsets inside the
tile (one register each, loop-invariant) from a scalar base that walks K; rows/columns past the edge are clamped to
the last one instead of wrapped (loaded, never stored), so the offsets stay inside the tile.

This times, for every random-dev shape whose binary reads an operand element-wise, the sweep's six fastest configs
both ways in one process (the kernels copied with the switch flipped: ``harness.switched_plans``), beside torch.matmul, as
``theodolite validate`` times a shape, and prints each way's best against torch.  Run on a GPU from the repository
root (writes ``$OUT/scalar-offsets-<gpu>.json``)::

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/scalar_offsets.py
"""

import sys

PER_SHAPE = 6


def shapes(
    gpu: str, classes: tuple[str, ...] = ("scalar", "scalar-a", "scalar-b")
) -> list[tuple[str, int, int, int, str, list[str]]]:
    """(name, M, N, K, load class, the sweep's fastest non-TMA configs) of the random-dev shapes whose binary's load
    class is one of ``classes`` (element-wise operands) and that copy no operand."""
    from harness import fastest
    from theodolite.kernels.config import Problem, needs_aligned_copy, operand_loads
    from theodolite.results import load_results

    out = []
    for s in load_results(f"reports/results/validate-random-dev-{gpu}.json").shapes:
        problem = Problem(s.M, s.N, s.K)
        loads = operand_loads(problem)
        if loads in classes and not any(needs_aligned_copy(problem)):
            keys = [c for c in fastest(s.configs, 3 * PER_SHAPE) if not c.startswith("tma/")][:PER_SHAPE]
            out.append((s.name, s.M, s.N, s.K, loads, keys))
    return out


def main() -> None:
    from harness import gpu_name, time_switch

    gpu = gpu_name()
    todo = shapes(gpu)
    if len(sys.argv) > 1:
        todo = todo[: int(sys.argv[1])]
    time_switch(todo, "SCALAR_OFFSETS", ("pointers", "offsets"), f"scalar-offsets-{gpu}", "scalar_offsets.py")


if __name__ == "__main__":
    main()
