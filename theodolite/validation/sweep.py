"""The sweep: per shape, the picks first, then one measurement of torch.matmul and every legal config.

``run_validation`` saves the results file after every shape, so ``--resume`` continues an interrupted sweep,
``--shard i/n`` splits one over several machines (``merge_files`` joins them) and ``--budget-s`` stops before a
shape that would not fit.  Measurement, model, peers and the clock come in a ``Harness``, so the bookkeeping is
tested on a CPU with fake timings.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from theodolite.kernels.config import GemmConfig, KernelLimits, Problem, legal_configs
from theodolite.results import Results, ShapeResult, load_results, save_results
from theodolite.validation.final import Final, _release_memory, time_final_round
from theodolite.validation.peers import FIXED_CONFIG, fixed_pick
from theodolite.validation.picks import ModelPick, model_pick
from theodolite.validation.shapes import Shape, ValidateSettings, ValidationError, result_key, shard_of
from theodolite.validation.summary import _progress, shape_line

# measure(shape, configs) -> ShapeResult with torch_ms, configs, errors, max_rel_error filled in
Measure = Callable[[Shape, list[GemmConfig]], ShapeResult]
# autotune(shape, configs) -> (picked key, wall seconds)
Autotune = Callable[[Shape, list[GemmConfig]], tuple[str | None, float]]


@dataclass
class Harness:
    """Everything the sweep touches from outside, injectable for tests."""

    profile: Any
    limits: KernelLimits
    measure: Measure
    pick: Callable[[Problem, Any], ModelPick] = model_pick
    nvmmh: Any = None  # an object with .pick(problem, legal)
    autotune: Autotune | None = None
    final: Final | None = None
    clock: Callable[[], float] = time.monotonic
    log: Callable[[str], None] = print
    save: Callable[[Results, Any], Any] = save_results
    # what an empty kernel reads in each timing mode (kernels.benchmark.timing_floors), stored with the results
    floors: Callable[[], dict[str, float]] | None = None


def _new_results(settings: ValidateSettings, harness: Harness, device: str, command: str) -> Results:
    profile = harness.profile
    return Results(
        device=device,
        command=command,
        created_utc=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        profile_fingerprint=str(getattr(profile, "fingerprint", "")),
        profile_path=str(getattr(profile, "origin", "")),
        settings={
            "kind": "validate",
            "suite": settings.suite,
            "dtype": settings.dtype,
            "layout": settings.layout,
            "peers": list(settings.peers),
            "shard": f"{settings.shard[0]}/{settings.shard[1]}",
            "variants": list(settings.variants or ()),
            "rep_ms": settings.rep_ms,
            "max_reps": settings.max_reps,
            "fixed_config": FIXED_CONFIG.key,
            "timing": (
                "inputs over L2/2: median of CUDA-event runs after an L2 flush by a read; smaller: median GPU time"
                " per call of CUDA-graph replays of back-to-back calls rotating input copies (> 2x L2, at most 32;"
                " host launch cost excluded); torch.matmul side by side; then the final round"
            ),
        },
    )


def validate_shape(shape: Shape, harness: Harness, settings: ValidateSettings) -> ShapeResult:
    """One shape: picks first (model, peers), then one measurement of torch.matmul and every legal config."""
    problem = shape.problem
    legal = legal_configs(problem, harness.limits, harness.profile, settings.variants)
    picks: dict[str, str] = {}
    notes: dict[str, str] = {}
    chosen = harness.pick(problem, harness.profile)
    if chosen.error:
        notes["model"] = chosen.error
    extra: list[GemmConfig] = []
    if chosen.key is not None:
        config = GemmConfig.from_key(chosen.key)
        if config not in legal:
            notes["model"] = f"model picked {chosen.key}, which legal_configs does not list"
            extra.append(config)
    if "fixed" in settings.peers:
        fixed = fixed_pick(problem, legal)
        if fixed is not None:
            picks["fixed"] = fixed.key
    if "nvmmh" in settings.peers and harness.nvmmh is not None:
        try:
            nv = harness.nvmmh.pick(problem, legal)
            if nv is not None:
                picks["nvmmh"] = nv.key
        except Exception as error:
            notes["nvmmh"] = f"{type(error).__name__}: {str(error)[:200]}"
    try:
        result = harness.measure(shape, legal + extra)
    except Exception as error:  # e.g. out of memory for the inputs: record it and go on with the sweep
        result = ShapeResult(shape.name, shape.m, shape.n, shape.k, shape.dtype, shape.layout, shape.batch)
        notes["measure"] = f"{type(error).__name__}: {str(error)[:300]}"
        _release_memory()
    result.model_pick = chosen.key
    result.model_predicted_ms = dict(chosen.predicted_ms)
    result.model_bottleneck = chosen.bottleneck
    result.selection_us = chosen.selection_us
    if "autotune" in settings.peers and harness.autotune is not None:
        try:
            key, wall = harness.autotune(shape, legal)
            if key is not None:
                picks["autotune"] = key
            result.autotune_wall_s = wall
        except Exception as error:
            notes["autotune"] = f"{type(error).__name__}: {str(error)[:200]}"
    result.peer_picks = picks
    for who, note in notes.items():
        result.errors[f"@{who}"] = note
    if settings.final and harness.final is not None:
        time_final_round(result, harness.final)
    return result


def run_validation(
    shapes: Sequence[Shape],
    settings: ValidateSettings,
    harness: Harness,
    output: str | Path | None,
    device: str = "",
    command: str = "",
    started: float | None = None,
    versions: dict[str, str] | None = None,
) -> Results:
    """Sweep the (sharded) shapes, saving after each; resume skips shapes already in ``output``.

    The budget counts from ``started`` (default: now, on ``harness.clock``) and stops before a shape
    whose expected duration (the median so far) would overrun it.
    """
    start = harness.clock() if started is None else started
    mine = shard_of(shapes, *settings.shard)
    results: Results | None = None
    if settings.resume and output is not None and Path(output).is_file():
        results = load_results(output)
        mine_label = f"{settings.shard[0]}/{settings.shard[1]}"
        held = results.settings.get("shard")
        # a whole-suite file (shard 0/1) may seed any shard: its shapes are skipped and the file becomes the shard's
        if held not in (None, "0/1", mine_label):
            raise ValidationError(f"{output}: holds shard {held}, not {mine_label}")
        suite = results.settings.get("suite")
        if suite not in (None, settings.suite):  # resumed, the file would hold two suites' shapes under one name
            raise ValidationError(
                f"{output}: holds suite {suite}, not {settings.suite}: resume it with --shapes {suite}"
            )
        results.settings["shard"] = mine_label
    if results is None:
        results = _new_results(settings, harness, device, command)
    if harness.floors is not None and "timing_floor" not in results.settings:
        results.settings["timing_floor"] = harness.floors()
    for name, value in (versions or {}).items():
        setattr(results, name, value)
    done = {result_key(s) for s in results.shapes}
    todo = [shape for shape in mine if shape.key not in done]
    results.settings["shapes_total"] = len(mine)
    if done:
        harness.log(f"resuming: {len(mine) - len(todo)} of {len(mine)} shapes already in {output}")
    durations: list[float] = []
    progress = _progress(len(todo))
    stopped_for_budget = False
    for index, shape in enumerate(todo):
        elapsed = harness.clock() - start
        if settings.budget_s is not None:
            estimate = statistics.median(durations) if durations else 0.0
            if elapsed + estimate > settings.budget_s:
                harness.log(
                    f"budget: {elapsed:.0f}s spent, next shape ~{estimate:.0f}s, budget {settings.budget_s:.0f}s: "
                    f"stopping with {len(todo) - index} shape(s) left (rerun with --resume)"
                )
                stopped_for_budget = True
                break
        t0 = harness.clock()
        result = validate_shape(shape, harness, settings)
        durations.append(harness.clock() - t0)
        results.shapes.append(result)
        results.settings["incomplete"] = len(results.shapes) < len(mine)
        results.settings["wall_s"] = round(results.settings.get("wall_s", 0.0) + durations[-1], 2)
        if output is not None:
            harness.save(results, output)
        progress(shape_line(result, durations[-1]))
        harness.log(shape_line(result, durations[-1], index + 1, len(todo)))
    results.settings["incomplete"] = len(results.shapes) < len(mine)
    if stopped_for_budget:
        results.settings["stopped_for_budget"] = True
    if output is not None:
        harness.save(results, output)
    return results


def _distinct_shards(parts: Sequence[Results], setting: str) -> bool:
    """Whether the parts are distinct shards ``i/n`` of one ``n`` (n > 1) by their ``setting`` (shard, final_shard)."""
    labels = [str(part.settings.get(setting, "")) for part in parts]
    counts = {label.partition("/")[2] for label in labels}
    return len(set(labels)) == len(labels) and len(counts) == 1 and counts != {"1"} and all("/" in x for x in labels)


def merge_files(paths: Sequence[str | Path], output: str | Path) -> Results:
    """Join shard files into one; a later file wins on a repeated shape (a re-measurement replaces it)."""
    from theodolite.results import merge_results

    parts = [load_results(path) for path in paths]
    merged = merge_results(parts)
    merged.settings = {**merged.settings, "merged_from": [str(p) for p in paths]}
    merged.settings.pop("shard", None)
    merged.settings.pop("final_shard", None)
    merged.settings.pop("stopped_for_budget", None)
    rounds = [part.settings["final_round"] for part in parts if part.settings.get("final_round")]
    if rounds:  # shards of one final round (validate --final FILE --shard i/n)
        merged.settings["final_round"] = {
            **rounds[0],
            "shapes": sum(1 for shape in merged.shapes if shape.final_ms),
            "wall_s": round(sum(float(r.get("wall_s", 0.0)) for r in rounds), 1),
        }
    merged.settings["incomplete"] = any(bool(part.settings.get("incomplete")) for part in parts)
    totals = [int(part.settings.get("shapes_total", len(part.shapes))) for part in parts]
    if _distinct_shards(parts, "final_shard"):  # one sweep's final round in shards: each part carries its total
        merged.settings["shapes_total"] = totals[0]
    elif _distinct_shards(parts, "shard"):  # shards i/n of one sweep: their shapes are disjoint however each was seeded
        merged.settings["shapes_total"] = sum(totals)
    else:  # a re-measurement of some shapes replaces them and does not add to the total
        merged.settings["shapes_total"] = sum(totals) - (sum(len(part.shapes) for part in parts) - len(merged.shapes))
    merged.settings["wall_s"] = round(sum(float(part.settings.get("wall_s", 0.0)) for part in parts), 2)
    save_results(merged, output)
    return merged
