"""Wide split-K tiles with the cooperative reduction: do 64x128 and 128x128 tiles in 4-8 K-slices pay now?

The split-K space stops at two slices for 64x128x64 (and 16) and 128x128x64 tiles: with the last arriver reducing,
deeper splits of wide tiles read too many partials (64 KB each).  The cooperative reduction (``config.cooperative_
reduction``) shares that read among the slices (``coop_splitk.py``: 64x128x64 k16 1.17-2.50x faster), so a wide tile in
4 or 8 slices can fill the SMs of the llm shapes with M <= 512 (128x4096x4096 in 128x128 tiles: 32 tiles x 4 slices =
128 programs) reading each B panel once.  For every shape of both suites on which a candidate is legal and reduces
cooperatively, this times the candidates beside the committed sweep's three fastest configs and torch.matmul, side by
side as ``theodolite validate`` times a shape.  Run on a GPU from the repository root (writes
``$OUT/wide-splitk-<gpu>.json``)::

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/wide_splitk.py

``--merge TIMES RESULTS`` adds the candidates' times to a committed results file's shapes that lack them.
"""

import math
import sys

# (block_m, block_n, block_k, warps, stages, split_k): wide split-K tiles at 4 and 8 slices (outside the space)
CANDIDATES = ((64, 128, 64, 4, 4, 4), (64, 128, 64, 4, 4, 8), (128, 128, 64, 8, 3, 4), (128, 128, 64, 8, 3, 8),
              (128, 64, 64, 4, 4, 4), (128, 64, 64, 4, 4, 8), (128, 256, 64, 8, 3, 4))  # fmt: skip
EXTRA = [f"splitk/{bm}x{bn}x{bk}/g8/w{w}/s{s}/k{split}" for bm, bn, bk, w, s, split in CANDIDATES]


def legal_extra(m: int, n: int, k: int, sm_count: int) -> list[str]:
    """The candidates legal on an M x N x K problem that reduce cooperatively on a GPU of ``sm_count`` SMs."""
    from theodolite.kernels.config import GemmConfig, cooperative_reduction

    out = []
    for key in EXTRA:
        c = GemmConfig.from_key(key)
        tiles = math.ceil(m / c.block_m) * math.ceil(n / c.block_n)
        if c.split_k * c.block_k <= k and cooperative_reduction(c, tiles, sm_count):
            out.append(key)
    return out


def shapes(gpu: str) -> list[tuple[str, int, int, int, list[str], list[str]]]:
    """(suite:name, M, N, K, the sweep's three fastest configs, the legal candidates)."""
    import torch
    from harness import sweep_shapes

    sm_count = torch.cuda.get_device_properties(0).multi_processor_count
    return sweep_shapes(gpu, ("llm", "random-dev"), lambda s: legal_extra(s.M, s.N, s.K, sm_count))


def main() -> None:
    if sys.argv[1:2] == ["--merge"]:
        from harness import merge_times

        print(f"{sys.argv[3]}: {merge_times(sys.argv[2], sys.argv[3], EXTRA, 'wide_splitk.py')[0]} config times added")
        return
    from harness import gpu_name, time_candidates

    gpu = gpu_name()
    print("wrote", time_candidates(shapes(gpu), "wide", f"wide-splitk-{gpu}", "wide_splitk.py"), file=sys.stderr)


if __name__ == "__main__":
    main()
