"""A wider scan of tiles, K-steps, warps and stages for single shapes under issue 4's bar.

dev072 1536x512x640 reads 0.84x of torch.matmul on the H100 with the space's best (TMA 64x128x64 w4 s8, 6.0 us against
5.0); ``near_bar.py`` tried 4-8 stages of the 64x64 to 128x64 tiles at BLOCK_K 64 and 4 warps.  This times, beside the
sweep's three fastest and torch.matmul as ``validate`` times the shape, the persistent and TMA kernels on the tiles that
give the shape 96-192 programs (64x128, 128x64, 64x64) at BLOCK_K 32, 64 and 128, 4 and 8 warps, and 3, 5, 7 and 9
stages where they fit the shared memory.  Run on a GPU from the repository root::

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/tile_scan.py [NAME ...]

(default dev072; ``$OUT/tile-scan-<gpu>.json``).
"""

import sys

TILES = ((64, 128), (128, 64), (64, 64))
SMEM_LIMIT = 227 * 1024


def scan_keys(k: int) -> list[str]:
    """The scanned configs that fit the shared memory and whose pipeline is not deeper than the K-loop."""
    from theodolite.kernels.config import GemmConfig, smem_bytes

    keys = []
    for variant in ("persistent", "tma"):
        for bm, bn in TILES:
            for bk in (32, 64, 128):
                for warps in (4, 8):
                    for stages in (3, 5, 7, 9):
                        c = GemmConfig(variant, bm, bn, bk, 8, warps, stages, 1)
                        if smem_bytes(c, "bf16") + 1024 > SMEM_LIMIT or (stages - 1) * bk > k:
                            continue
                        keys.append(c.key)
    return keys


def main() -> None:
    from harness import fastest, gpu_name, time_candidates

    from theodolite.results import load_results

    names = sys.argv[1:] or ["dev072"]
    gpu = gpu_name()
    todo = []
    for suite in ("llm", "random-dev"):
        for s in load_results(f"reports/results/validate-{suite}-{gpu}.json").shapes:
            if s.name in names:
                best = fastest(s.configs, 3)
                todo.append((f"{suite}:{s.name}", s.M, s.N, s.K, best, [c for c in scan_keys(s.K) if c not in best]))
    path = time_candidates(todo, "scan", f"tile-scan-{gpu}", "tile_scan.py " + " ".join(names))
    print("wrote", path, file=sys.stderr)


if __name__ == "__main__":
    main()
