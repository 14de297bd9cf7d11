"""Large aligned shapes: one program per tile, and the grouping of the tile order.

The H100 llm final round reads the large M = 2048-16384 shapes at 0.97-0.98x of torch.matmul with the space's best
(128x256 TMA tiles, persistent, flattened), where issue 4's own sweep of a plain tutorial kernel (one program per tile,
grouped order) read 1.06x at 8192^3.  This times, beside the sweep's three fastest and torch.matmul as ``validate``
times a shape, each of those fastest persistent / TMA configs (``/f`` dropped) launched with one program per tile
(``@np``: the shipped kernel on a grid of every tile, so its tile loop runs once) with GROUP_M 4, 8 and 16, and
persistent and flattened with GROUP_M 4 and 16.  Run on a GPU from the repository root::

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/large_grid.py [MIN_US MAX_US]

(llm shapes whose final-round best lies between MIN_US and MAX_US, default 80 and 3000; ``$OUT/large-grid-<gpu>.json``).
"""

import sys
from typing import Any


def plans_for(sets: list[tuple[Any, Any, Any]], key: str, extra: Any = None) -> list[Any]:
    """Each (A, B, out) set's plan of ``key`` ('config' or 'config@np': every tile its own program)."""
    from theodolite.kernels.config import GemmConfig
    from theodolite.kernels.launch import plan_gemm

    base, _, way = key.partition("@")
    config = GemmConfig.from_key(base)
    plans = [plan_gemm(a, b, config, out=o) for a, b, o in sets]
    if way == "np":
        for plan, (a, b, _) in zip(plans, sets, strict=True):
            tiles = -(-a.shape[0] // config.block_m) * -(-b.shape[1] // config.block_n)
            (step,) = plan.steps
            step.grid = (tiles,)
    return plans


def candidates(best: list[str]) -> list[str]:
    """The one-program-per-tile and regrouped forms of the persistent / TMA configs among ``best``."""
    from theodolite.kernels.config import GemmConfig

    out: list[str] = []
    for key in best:
        c = GemmConfig.from_key(key)
        if c.variant not in ("persistent", "tma"):
            continue
        for group in (4, 8, 16):
            plain = GemmConfig(c.variant, c.block_m, c.block_n, c.block_k, group, c.num_warps, c.num_stages, 1)
            flat = GemmConfig(c.variant, c.block_m, c.block_n, c.block_k, group, c.num_warps, c.num_stages, 1, True)
            for cand in (plain.key + "@np", flat.key if group != 8 else None):
                if cand and cand not in best and cand not in out:
                    out.append(cand)
    return out


def main() -> None:
    from harness import fastest, gpu_name, time_candidates

    from theodolite.results import load_results

    lo, hi = (float(x) for x in sys.argv[1:3]) if len(sys.argv) > 2 else (80.0, 3000.0)
    gpu = gpu_name()
    todo = []
    for s in load_results(f"reports/results/validate-llm-{gpu}.json").shapes:
        final = {k: v for k, v in (s.final_ms or {}).items() if k != "torch" and v}
        if final and lo <= min(final.values()) * 1e3 <= hi and s.M >= 512:
            best = fastest(s.configs, 3)
            todo.append((f"llm:{s.name}", s.M, s.N, s.K, best, candidates(best)))
    print(len(todo), "shapes", flush=True)
    args = " ".join(sys.argv[1:])
    path = time_candidates(todo, "np/regrouped", f"large-grid-{gpu}", f"large_grid.py {args}".strip(), plans_for)
    print("wrote", path, file=sys.stderr)


if __name__ == "__main__":
    main()
