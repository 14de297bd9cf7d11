"""Peer pickers for the offline comparison: NVIDIA's nvMatmulHeuristics (target TRITON, H100_SXM).

nvMatmulHeuristics proposes configs of its own space (CTA tile, warp tile, stages, split-K).
We map its ranked list onto our measured space: the first proposal whose tile, warps, stages and
split all exist among the measured configs; failing that, the measured config nearest to its
first proposal (log distance over the tile, then stages and warps).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

from theodolite.kernels.config import GemmConfig

from theodolite.results import ShapeResult

_LAYOUTS = {"nn": "NN_ROW_MAJOR", "nt": "NT_ROW_MAJOR", "tn": "TN_ROW_MAJOR", "tt": "TT_ROW_MAJOR"}
_PRECISION = {"bf16": "BSS", "fp16": "HSS", "tf32": "TST", "fp32": "SSS"}
GPU = "H100_SXM"
PROPOSALS = 8


def available() -> bool:
    try:
        import nvMatmulHeuristics  # noqa: F401
    except ImportError:
        return False
    return True


@lru_cache(maxsize=4)
def _interface(gpu: str = GPU) -> Any:
    import nvMatmulHeuristics as nvmmh

    return nvmmh.NvMatmulHeuristicsInterfaceEx(
        backend=nvmmh.NvMatmulHeuristicsTarget.TRITON,
        flags=nvmmh.NvMatmulHeuristicsFlags.PERF_MODEL_BASED_AUTO_TUNING,
        gpu=getattr(nvmmh.NvMatmulHeuristicsNvidiaGpu, gpu),
    )


def proposals(m: int, n: int, k: int, dtype: str = "bf16", layout: str = "nn", gpu: str = GPU) -> list[dict[str, int]]:
    """nvMatmulHeuristics' ranked proposals as plain dicts (bm, bn, bk, warps, stages, split)."""
    import nvMatmulHeuristics as nvmmh

    interface = _interface(gpu)
    problem = interface.makeNvMatmulHeuristicsProblem(m, n, k, getattr(nvmmh.NvMatmulHeuristicsMatmulLayout,
                                                                         _LAYOUTS[layout]))  # fmt: skip
    out = []
    for item in interface.get(problem, PROPOSALS, precision=_PRECISION.get(dtype, "BSS")):
        kc = item["kernel"]
        warps = max(1, (kc.cta_tile_m // max(1, kc.warp_tile_m)) * (kc.cta_tile_n // max(1, kc.warp_tile_n)))
        out.append({"bm": kc.cta_tile_m, "bn": kc.cta_tile_n, "bk": kc.cta_tile_k, "warps": warps,
                    "stages": kc.stages, "split": kc.split_k or 1})  # fmt: skip
    return out


def _distance(p: dict[str, int], c: GemmConfig) -> tuple[float, float, float]:
    tile = sum(abs(math.log2(a / b)) for a, b in ((p["bm"], c.block_m), (p["bn"], c.tile_n), (p["bk"], c.block_k)))
    split = abs(math.log2(max(1, p["split"]) / c.split_k))
    return (tile + split, abs(p["stages"] - c.num_stages), abs(math.log2(p["warps"] / c.num_warps)))


def map_to_space(props: list[dict[str, int]], keys: list[str]) -> str | None:
    """The measured config for nvMatmulHeuristics' proposals (exact match first, else nearest to the first)."""
    configs = [GemmConfig.from_key(key) for key in keys]
    configs = [c for c in configs if c.variant in ("persistent", "splitk")]  # its space: plain and split-K kernels
    if not props or not configs:
        return None
    for p in props:
        for c in configs:
            if (c.block_m, c.block_n, c.block_k, c.num_warps, c.num_stages, c.split_k) == (
                p["bm"], p["bn"], p["bk"], p["warps"], p["stages"], max(1, p["split"])
            ):  # fmt: skip
                return c.key
    first = props[0]
    return min(configs, key=lambda c: (_distance(first, c), c.key)).key


def nvmmh_pick(shape: ShapeResult, measured: dict[str, float]) -> str | None:
    """The peer pick for one shape of a results file."""
    props = proposals(shape.M, shape.N, shape.K, shape.dtype, shape.layout)
    return map_to_space(props, sorted(measured))
