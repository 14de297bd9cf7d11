"""Deep split-K: do 32 or 64 K-slices help the shapes with few output tiles and a long K?

The split-K space stops at 16 slices.  Where the output has a handful of 16x64 tiles and K is long, the sweeps' best is
the deepest split and still scaling (H100 random-dev 16x64x128: dev039 19x127x14455 k8 45.5 us -> k16 26.7, torch.matmul
15.6; dev146 22x145x4866 17.1 -> 12.4; dev189 30x84x3701 13.5 -> 9.0): with element-wise (synchronous) loads a program
waits one memory latency per K-step, so its time follows its K-steps, and more slices put more of them in flight at
once.  Beside them, split-K tiles 128 rows tall (outside the space too): on the llm shapes with M = 128 the sweeps'
best loses 6-14% to torch.matmul (128x4096x4096 0.864x, 128x8192x3584 0.868x, 128x7168x8192 0.889x, H100), and a tile
that spans all of M reads each column panel of B once instead of twice.  For every shape of both suites on which a
candidate is legal (split_k x BLOCK_K <= K, at most SPLITK_MAX_WAVES waves of output tiles), this times, side by side
with torch.matmul as ``theodolite validate`` does (graph replays over rotated inputs when they fit in L2, L2-flushed
runs otherwise), the committed sweep's three fastest configs and the candidates.  Run on
a GPU from the repository root (writes ``$OUT/deep-splitk-<gpu>.json``)::

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/deep_splitk.py

On any machine, ``--merge TIMES RESULTS`` adds the kept candidates' times (ms, as measured there) to the shapes of
a committed results file that lack them, so that it again holds every config of the space::

    python3 experiments/deep_splitk.py --merge deep-splitk-h100.json \\
        reports/results/validate-random-dev-h100.json
"""

import math
import sys

# (block_m, block_n, block_k, warps, stages, split_k) of the candidates (outside the space when this was written):
# deep splits of the space's small split-K tiles, then split-K tiles that span M = 128
CANDIDATES = (
    (16, 64, 128, 4, 4, 32),
    (16, 64, 128, 4, 4, 64),
    (32, 128, 64, 4, 4, 32),
    (32, 128, 64, 4, 4, 64),
    (128, 64, 64, 4, 4, 2),
    (128, 64, 64, 4, 4, 4),
    (128, 64, 128, 4, 3, 2),
    (128, 128, 64, 8, 4, 4),
)
EXTRA = [f"splitk/{bm}x{bn}x{bk}/g8/w{w}/s{s}/k{split}" for bm, bn, bk, w, s, split in CANDIDATES]
KEPT = EXTRA[:2]  # 16x64x128 k32 and k64 joined the space (the 128-row tiles never won; 32x128x64 k32/k64 once)


def legal_extra(m: int, n: int, k: int, sm_count: int) -> list[str]:
    """The candidates that split-K's legality rules allow on an M x N x K problem on a GPU of ``sm_count`` SMs."""
    from theodolite.kernels.config import SPLITK_MAX_WAVES

    return [key for (bm, bn, bk, _, _, split), key in zip(CANDIDATES, EXTRA, strict=True)
            if split * bk <= k and math.ceil(m / bm) * math.ceil(n / bn) <= SPLITK_MAX_WAVES * sm_count]  # fmt: skip


def shapes(gpu: str) -> list[tuple[str, int, int, int, list[str], list[str]]]:
    """(suite:name, M, N, K, the sweep's three fastest configs, the legal candidates) of both suites' shapes on which
    a candidate is legal."""
    import torch
    from harness import sweep_shapes

    sm_count = torch.cuda.get_device_properties(0).multi_processor_count
    return sweep_shapes(gpu, ("random-dev", "llm"), lambda s: legal_extra(s.M, s.N, s.K, sm_count))


def merge(times_path: str, results_path: str) -> None:
    """Add the kept candidates' times to the results file's shapes (``--merge``); no GPU."""
    from harness import merge_times

    print(f"{results_path}: {merge_times(times_path, results_path, KEPT, 'deep_splitk.py')[0]} config times added")


def main() -> None:
    if sys.argv[1:2] == ["--merge"]:
        merge(sys.argv[2], sys.argv[3])
        return
    from harness import gpu_name, time_candidates

    gpu = gpu_name()
    print("wrote", time_candidates(shapes(gpu), "deep", f"deep-splitk-{gpu}", "deep_splitk.py"), file=sys.stderr)


if __name__ == "__main__":
    main()
