"""The dry run (CPU): what a sweep would time per shape, the picks, and roughly how long it takes.

``estimate_shape_s`` follows the benchmark timer's rule (a few runs, then up to ``rep_ms`` of runs, each after an
L2 flush) on the model's predicted times; ``theodolite validate --dry-run`` prints its rows before a GPU is booked.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from theodolite.kernels.config import KernelLimits, legal_configs
from theodolite.validation.peers import fixed_pick
from theodolite.validation.picks import model_pick
from theodolite.validation.shapes import Shape, ValidateSettings, shard_of

FLUSH_MS = 0.12  # L2 flush (a 256 MB read) before every timed run, plus launch gaps
CONFIG_OVERHEAD_MS = 6.0  # plan, NaN fill, checked run, error check, sync per config


def estimate_shape_s(
    predicted_ms: Sequence[float], rep_ms: float = 8.0, max_reps: int = 50, min_reps: int = 3
) -> float:
    """Rough wall seconds to time one shape: per config, min_reps runs, then up to rep_ms of runs (capped)."""
    total = 0.0
    for ms in predicted_ms:
        reps = max(min_reps, min(max_reps, int(rep_ms / max(ms, 1e-3))))
        total += reps * (ms + FLUSH_MS) + CONFIG_OVERHEAD_MS + ms
    return total / 1e3


def dry_run(
    shapes: Sequence[Shape], settings: ValidateSettings, profile: Any, nvmmh: Any = None
) -> list[dict[str, Any]]:
    """Per shape of this shard: legal configs, the model's and peers' picks, an estimate of the timing cost."""
    limits = KernelLimits.from_profile(profile)
    rows = []
    for shape in shard_of(shapes, *settings.shard):
        problem = shape.problem
        legal = legal_configs(problem, limits, profile, settings.variants)
        chosen = model_pick(problem, profile, repeats=1)
        predicted = [chosen.predicted_ms.get(c.key, 0.05) for c in legal] or [0.05]
        picks = {"model": chosen.key or f"- ({chosen.error})"}
        if "fixed" in settings.peers:
            fixed = fixed_pick(problem, legal)
            picks["fixed"] = fixed.key if fixed else "-"
        if nvmmh is not None:
            try:
                nv = nvmmh.pick(problem, legal)
                picks["nvmmh"] = nv.key if nv else "-"
            except Exception as error:
                picks["nvmmh"] = f"- ({type(error).__name__})"
        seconds = estimate_shape_s(predicted, settings.rep_ms, settings.max_reps)
        if "autotune" in settings.peers:
            seconds += len(legal) * 0.13  # do_bench warmup 25 ms + rep 100 ms per config
        rows.append({"shape": shape, "legal": len(legal), "picks": picks, "estimate_s": seconds})
    return rows
