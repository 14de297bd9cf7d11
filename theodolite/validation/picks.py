"""The model's pick of a shape: what ``theodolite.select`` returns, every config's predicted time, selection time.

``model_pick`` is what the sweep records per shape; ``add_model_picks`` scores a results file whose every legal
config was timed (a ``bench`` sweep) after the fact, on a CPU, since the model only chooses among those configs.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from theodolite.kernels.config import Problem
from theodolite.results import Results


@dataclass
class ModelPick:
    key: str | None
    predicted_ms: dict[str, float] = field(default_factory=dict)
    bottleneck: str | None = None
    selection_us: float | None = None
    error: str | None = None


def model_pick(problem: Problem, profile: Any, repeats: int = 5) -> ModelPick:
    """What ``theodolite.select`` picks (the fast path users get), every legal config's predicted time
    (for the rank correlation), and the host time of a selection that misses the per-shape cache."""
    try:
        from theodolite import api, model
    except ImportError as error:
        return ModelPick(None, error=f"theodolite.model unavailable: {error}")
    rank = getattr(model, "rank", None)
    if rank is None:
        return ModelPick(None, error="theodolite.model has no rank() yet")
    p = problem
    plain = Problem(p.m, p.n, p.k, dtype=p.dtype, layout=p.layout, batch=p.batch, out_dtype=p.out_dtype)

    def selection() -> Any:
        if problem == plain:  # contiguous operands: the public entry point, as users call it
            return api.select(p.m, p.n, p.k, dtype=p.dtype, layout=p.layout, batch=p.batch, out_dtype=p.out_dtype,
                              profile=profile)  # fmt: skip
        return api._select_problem(problem, profile)

    try:
        predictions = rank(problem, profile)
        selection()  # warm the profile's tables: a steady-state new-shape selection
        samples = []
        for _ in range(repeats):
            api._CACHE.clear()  # a selection that misses the per-shape cache
            start = time.perf_counter()
            chosen = selection()
            samples.append((time.perf_counter() - start) * 1e6)
        bottleneck = chosen.bottleneck
    except Exception as error:  # the model is under test: record, do not abort the sweep
        return ModelPick(None, error=f"model failed: {type(error).__name__}: {str(error)[:300]}")
    predicted = {p.config.key: float(p.time_s) * 1e3 for p in predictions if math.isfinite(p.time_s)}
    return ModelPick(chosen.config.key, predicted, bottleneck, float(statistics.median(samples)))


def add_model_picks(results: Results, profile: Any, pick: Callable[[Problem, Any], ModelPick] | None = None) -> int:
    """Fill the model's pick and predictions into a results file whose every legal config was timed (CPU).

    A ``bench`` sweep times the exhaustive oracle side by side with torch.matmul; the model only chooses
    among those configs, so its picks can be scored afterwards without the GPU.  A pick the file did not
    time is recorded under ``errors['@model']``.  Returns how many shapes got a pick.
    """
    choose = pick or model_pick
    picked = 0
    for shape in results.shapes:
        problem = Problem(shape.M, shape.N, shape.K, dtype=shape.dtype, batch=shape.batch, layout=shape.layout)
        chosen = choose(problem, profile)
        shape.model_pick = chosen.key
        shape.model_predicted_ms = dict(chosen.predicted_ms)
        shape.model_bottleneck = chosen.bottleneck
        shape.selection_us = chosen.selection_us
        shape.errors.pop("@model", None)
        if chosen.error:
            shape.errors["@model"] = chosen.error
        elif chosen.key not in shape.configs:
            shape.errors["@model"] = f"model picked {chosen.key}, which this file did not time"
        if chosen.key:
            picked += 1
    results.profile_fingerprint = str(getattr(profile, "fingerprint", ""))
    results.profile_path = str(getattr(profile, "origin", ""))
    results.settings["model_picks"] = "added after the sweep on the CPU (selection_us measured there)"
    return picked
