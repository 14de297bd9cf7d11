"""The peers the model's pick is compared with: a fixed config and nvMatmulHeuristics' pick.

Both map onto the nearest legal config of our space (``nearest_config``, log2 distances of tile, warps, stages
and split-k), so every peer's pick is among the configs the sweep times.  ``add_peer_picks`` fills them into a
results file after the sweep, on a CPU (the GPU machine may lack the nvMatmulHeuristics package).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from theodolite.errors import TheodoliteError
from theodolite.kernels.config import GemmConfig, Problem
from theodolite.results import Results
from theodolite.validation.shapes import ValidationError

PEERS = ("fixed", "nvmmh", "autotune")
FIXED_CONFIG = GemmConfig("persistent", 128, 128, 64, 8, 8, 3, flatten=True)  # the space's entry (flattened loop)


def _log2(a: float, b: float) -> float:
    return abs(math.log2(max(a, 1) / max(b, 1)))


def nearest_config(
    target: dict[str, int], legal: Sequence[GemmConfig], preferred_variants: Sequence[str] = ()
) -> GemmConfig | None:
    """The legal config closest to a (tile, warps, stages, split-k) answer, on log2 distances."""
    if not legal:
        return None
    order = {v: i for i, v in enumerate(preferred_variants)}

    def distance(config: GemmConfig) -> tuple[float, str]:
        d = (
            _log2(config.block_m, target["block_m"])
            + _log2(config.tile_n, target["block_n"])
            + _log2(config.block_k, target["block_k"])
            + 0.5 * _log2(config.num_warps, target.get("num_warps", config.num_warps))
            + 0.25 * abs(config.num_stages - target.get("num_stages", config.num_stages))
            + _log2(config.split_k, target.get("split_k", 1))
            + 0.5 * order.get(config.variant, len(order))
        )
        return d, config.key

    return min(legal, key=distance)


def fixed_pick(problem: Problem, legal: Sequence[GemmConfig]) -> GemmConfig | None:
    """The fixed 128x128x64 w8 s3 persistent config (or the nearest legal one for this problem)."""
    if FIXED_CONFIG in legal:
        return FIXED_CONFIG
    target = {"block_m": 128, "block_n": 128, "block_k": 64, "num_warps": 8, "num_stages": 3, "split_k": 1}
    return nearest_config(target, legal, ("persistent", "tma", "streamk", "splitk"))


_NVMMH_PRECISION = {"fp16": "HSH", "bf16": "BSB", "tf32": "TST", "fp32": "SSS"}


class NvmmhPeer:
    """nvMatmulHeuristics (target TRITON) answers mapped onto our nearest legal config."""

    def __init__(self, device_name: str = "H100") -> None:
        try:
            import nvMatmulHeuristics as nv
        except ImportError as error:
            raise ValidationError(f"peer nvmmh needs the nvMatmulHeuristics package ({error})") from None
        self.nv = nv
        gpu = self.gpu_for(device_name)
        self.gpu_name = gpu
        flags = nv.NvMatmulHeuristicsFlags.PERF_MODEL_BASED_AUTO_TUNING
        kwargs: dict[str, Any] = {"backend": nv.NvMatmulHeuristicsTarget.TRITON, "flags": flags}
        if gpu is not None:
            kwargs["gpu"] = getattr(nv.NvMatmulHeuristicsNvidiaGpu, gpu)
        self.interface = nv.NvMatmulHeuristicsInterfaceEx(**kwargs)

    @staticmethod
    def gpu_for(device_name: str) -> str | None:
        """Predefined hardware for a device name; None lets the library read the present GPU."""
        name = device_name.upper().replace(" ", "")
        for marker, gpu in (
            ("H200", "H200_SXM"),
            ("H100PCIE", "H100_PCIE"),
            ("H100NVL", "H100_NVL"),
            ("H100", "H100_SXM"),
            ("H20", "H20_SXM"),
            ("A100", "A100_SXM_80GB"),
            ("B200", "B200"),
        ):
            if marker in name:
                return gpu
        return None

    def answer(self, problem: Problem) -> dict[str, int]:
        nv = self.nv
        layouts = {"nn": "NN_ROW_MAJOR", "nt": "NT_ROW_MAJOR", "tn": "TN_ROW_MAJOR", "tt": "TT_ROW_MAJOR"}
        layout = getattr(nv.NvMatmulHeuristicsMatmulLayout, layouts[problem.layout])
        nv_problem = self.interface.makeNvMatmulHeuristicsProblem(
            max(problem.m, 1), max(problem.n, 1), max(problem.k, 1), layout, max(problem.batch, 1)
        )
        answers = self.interface.get(nv_problem, 1, precision=_NVMMH_PRECISION.get(problem.dtype))
        if not answers:
            raise ValidationError(f"nvMatmulHeuristics returned no config for {problem}")
        kernel = answers[0]["kernel"]
        warps = max(
            1, (kernel.cta_tile_m // max(1, kernel.warp_tile_m)) * (kernel.cta_tile_n // max(1, kernel.warp_tile_n))
        )
        return {
            "block_m": int(kernel.cta_tile_m),
            "block_n": int(kernel.cta_tile_n),
            "block_k": int(kernel.cta_tile_k),
            "num_warps": int(warps),
            "num_stages": int(kernel.stages),
            "split_k": int(kernel.split_k),
        }

    def pick(self, problem: Problem, legal: Sequence[GemmConfig]) -> GemmConfig | None:
        target = self.answer(problem)
        variants = (
            ("splitk", "persistent", "tma", "streamk")
            if target["split_k"] > 1
            else ("persistent", "tma", "streamk", "splitk")
        )
        return nearest_config(target, legal, variants)


def add_peer_picks(results: Results, peers: Sequence[str] = ("fixed", "nvmmh"), nvmmh: Any = None) -> int:
    """Fill fixed/nvmmh picks after the fact (CPU): they map onto configs the sweep already timed.

    The candidates are the configs of each shape's results (the legal set the sweep timed), so no
    profile and no GPU are needed.  Returns how many picks were added.
    """
    added = 0
    for shape in results.shapes:
        candidates = []
        for key in shape.configs:
            try:
                candidates.append(GemmConfig.from_key(key))
            except TheodoliteError:
                continue
        if not candidates:
            continue
        problem = Problem(shape.M, shape.N, shape.K, dtype=shape.dtype, batch=shape.batch, layout=shape.layout)
        if "fixed" in peers and "fixed" not in shape.peer_picks:
            fixed = fixed_pick(problem, candidates)
            if fixed is not None:
                shape.peer_picks["fixed"] = fixed.key
                added += 1
        if "nvmmh" in peers and "nvmmh" not in shape.peer_picks:
            peer = nvmmh or NvmmhPeer(results.device)
            nvmmh = peer
            picked = peer.pick(problem, candidates)
            if picked is not None:
                shape.peer_picks["nvmmh"] = picked.key
                added += 1
    if nvmmh is not None:
        results.settings["nvmmh_gpu"] = getattr(nvmmh, "gpu_name", None) or "present device"
    return added
