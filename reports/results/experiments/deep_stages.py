"""Deeper pipelines for the small-M llm shapes cuBLAS wins: do 6-16 stages pay?

``cublas_kernels.py`` read the kernels torch.matmul runs where our sweep best loses on the H100's llm shapes: for M <= 128
they are small tiles with deep pipelines (128x4096x4096: 64x64x64 in 13 stages; 64x4096x4096: 64x32x64 in 16;
128x8192x3584: 128x64x64 in 8), where our space stops at 4 stages.  For the llm shapes with M <= 512 whose sweep best
reads under 0.95x of torch.matmul, this times persistent, TMA and split-K configs with 5-16 stages (outside the space;
shared memory within the H100's 227 KB) beside the sweep's three fastest configs and torch.matmul, side by side as
``theodolite validate`` times a shape.  Run on a GPU from the repository root (writes ``$OUT/deep-stages-<gpu>.json``)::

    PYTHONPATH=$PWD OUT=$OUT python3 reports/results/experiments/deep_stages.py [--all]

``--all``: every llm shape with M <= 512 (``deep-stages-all-<gpu>.json``).
"""

import sys

# (block_m, block_n, block_k, warps, stages) per variant; split-K also at 2 and 4 slices
TILES = ((64, 64, 64, 4, 8), (64, 64, 64, 4, 12), (64, 32, 64, 4, 12), (64, 32, 64, 4, 16), (128, 64, 64, 4, 8),
         (64, 128, 64, 4, 8), (64, 64, 128, 4, 6), (128, 128, 64, 8, 6))  # fmt: skip
SPLIT_TILES = ((16, 64, 128, 4, 8), (64, 64, 64, 4, 8), (64, 64, 64, 4, 12), (64, 32, 64, 4, 16))
EXTRA = [f"{v}/{bm}x{bn}x{bk}/g8/w{w}/s{s}/k1" for v in ("persistent", "tma") for bm, bn, bk, w, s in TILES] + [
    f"splitk/{bm}x{bn}x{bk}/g8/w{w}/s{s}/k{split}" for bm, bn, bk, w, s in SPLIT_TILES for split in (2, 4)
]
UNDER = 0.95  # sweep best / torch.matmul below this
MAX_M = 512


def shapes(gpu: str) -> list[tuple[str, int, int, int, list[str], list[str]]]:
    """(llm:name, M, N, K, the sweep's three fastest configs, the candidates) for the small-M shapes cuBLAS wins."""
    from harness import fastest

    from theodolite import validation
    from theodolite.results import load_results

    out = []
    for s in load_results(f"reports/results/validate-llm-{gpu}.json").shapes:
        summary = validation.shape_summary(s)
        if s.M <= MAX_M and (summary["best_vs_torch"] or 9.0) < UNDER:
            out.append((f"llm:{s.name}", s.M, s.N, s.K, fastest(s.configs, 3), EXTRA))
    return out


def main() -> None:
    from harness import gpu_name, time_candidates

    global UNDER
    gpu = gpu_name()
    name = f"deep-stages-{gpu}"
    if sys.argv[1:2] == ["--all"]:  # every llm shape with M <= MAX_M, whatever its sweep best reads
        import harness

        UNDER, name = float("inf"), f"deep-stages-all-{gpu}"
        harness.in_workers.__defaults__ = (6,)  # fewer compiling workers: 14 ran out of memory on the vocabulary shapes
    print("wrote", time_candidates(shapes(gpu), "deep", name, "deep_stages.py"), file=sys.stderr)


if __name__ == "__main__":
    main()
