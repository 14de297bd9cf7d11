"""Calibrate's model stage: every model parameter the selection uses, from this GPU's timings of the bundled kernels.

1. probes (``model.calibration_probes``): each times a few (shape, config) pairs that isolate one term, and the
   model is solved for that parameter with the ones before it fixed (method "calibration-probe");
2. calibration set (``model.calibration_shapes``, seeded, disjoint from the report suites): per shape the model's
   fastest candidates and the best of each variant are timed side by side, within a time budget;
3. fit (``model.calibration_fit``): the parameters no probe isolates, by least squares of log(predicted /
   measured) over those timings plus a log-normal prior toward the structural defaults whose weight shape-fold
   cross-validation picks (``model.calibration_cv``: a parameter the timings do not determine stays at its
   default), with a bootstrap spread and a cross-validated score (method "calibration-fit").

Every timing is stored in the profile (curve ``model_calibration_timings``) so the fit can be redone on a CPU.
The GPU is reached through one injected callable, ``time_shape(m, n, k, layout, keys) -> {key: seconds}``, so all
of this runs on a CPU with a fake timer in the tests.

    python -m theodolite.probes.model_stage --show PROFILE     # the stored parameters, spreads, hold-out score
    python -m theodolite.probes.model_stage --refit PROFILE [-o OUT]   # the fit redone from its stored timings
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from theodolite.kernels.config import GemmConfig, Problem
from theodolite.model.calibration_cv import Choice, cross_validate, fit_regularised
from theodolite.model.calibration_fit import FitResult, Objective, Timing, fit, overrides
from theodolite.model.calibration_probes import (
    FIT_PARAMETERS,
    FLOOR_PARAMETERS,
    Probe,
    floor_sources,
    floor_values,
    probes,
)
from theodolite.model.calibration_shapes import DEFAULT_SEED, CalShape, calibration_shapes, check_disjoint
from theodolite.model.hardware import MODEL_PARAMETERS

from theodolite.profile.schema import METRICS, Curve, Measurement, Profile

TimeShape = Callable[[int, int, int, str, Sequence[str]], dict[str, float]]
Precompile = Callable[[Sequence[tuple[GemmConfig, Problem]]], None]
TIMINGS_CURVE = "model_calibration_timings"
METHOD_PROBE = "calibration-probe"
METHOD_FIT = "calibration-fit"
PROBE_SWEEPS = 3  # Gauss-Seidel sweeps over the probes before the calibration set is planned
PRECOMPILE_CHUNK = 8  # calibration shapes whose kernels are compiled together (in parallel) ahead of their timing
TOP_PREDICTED = 6  # the model's fastest candidates timed per calibration shape (plus the best of each variant)
REGRET_WEIGHT = 0.0  # the fit's selection-regret term (calibration_fit.Objective), beside the level residuals


def fit_objective() -> Objective:
    """The calibration fit's objective: level residuals, each shape's selection regret, and a log-normal prior
    toward the structural defaults whose weight the fit picks by cross-validation on its own shapes."""
    return Objective(regret=REGRET_WEIGHT, prior={name: MODEL_PARAMETERS[name][0] for name in FIT_PARAMETERS})


@dataclass(frozen=True)
class StageSettings:
    quick: bool = False
    seed: int = DEFAULT_SEED
    shapes: int = 0  # 0: 64 (quick: 24)
    budget_s: float = 0.0  # 0: 150 s (quick: 35 s): compiles, probes and calibration set together, fit excluded
    bootstrap: int = 0  # 0: 6 (quick: 3)
    exclude: tuple[str, ...] = ()  # report suites the calibration set must avoid (beyond llm, random-dev)

    @property
    def shape_count(self) -> int:
        return self.shapes or (24 if self.quick else 64)

    @property
    def budget(self) -> float:
        return self.budget_s or (35.0 if self.quick else 150.0)

    @property
    def resamples(self) -> int:
        return self.bootstrap or (3 if self.quick else 6)


@dataclass
class StageReport:
    """What the stage did: seconds per step, each parameter's result, the hold-out score."""

    seconds: dict[str, float] = field(default_factory=dict)
    probe_results: dict[str, FitResult] = field(default_factory=dict)  # parameter -> its probe's solve
    floors: dict[str, FitResult] = field(default_factory=dict)  # parameter -> its value read off a probe's timings
    fit_result: FitResult | None = None
    fit_names: tuple[str, ...] = FIT_PARAMETERS  # what the joint fit fitted
    holdout: dict[str, float] = field(default_factory=dict)
    prior: Choice | None = None  # the prior weight the fit's cross-validation picked, with every weight's loss
    shapes_timed: int = 0
    shapes_planned: int = 0
    notes: list[str] = field(default_factory=list)


def _timings(m: int, n: int, k: int, layout: str, keys: Sequence[str], time_shape: TimeShape) -> list[Timing]:
    measured = time_shape(m, n, k, layout, list(keys))
    good = {key: value for key, value in measured.items() if value is not None and math.isfinite(value) and value > 0}
    return [Timing(m, n, k, layout, key, float(good[key])) for key in keys if key in good]


def candidate_keys(profile: Profile, shape: CalShape, values: dict[str, float], top: int = TOP_PREDICTED) -> list[str]:
    """The configs timed on a calibration shape: the model's ``top`` fastest legal ones under ``values`` and the
    fastest legal one of each variant (so the fit sees the classes the model ranks low, too)."""
    from theodolite.model.predict import ConfigTable, evaluate

    problem = Problem(shape.m, shape.n, shape.k, dtype="bf16", layout=shape.layout)
    with overrides(values):
        table = ConfigTable(profile, "bf16")
        times, _ = evaluate(table, problem)
    mask = table.legal_mask(problem)
    legal = [int(i) for i in np.flatnonzero(mask)]
    legal.sort(key=lambda i: (times[i], i))
    chosen = legal[:top]
    for variant in dict.fromkeys(table.configs[i].variant for i in legal):
        best = next(i for i in legal if table.configs[i].variant == variant)
        if best not in chosen:
            chosen.append(best)
    return [table.keys[i] for i in chosen]


def _predicted_seconds(profile: Profile, shape: CalShape, keys: Sequence[str], values: dict[str, float]) -> float:
    from theodolite.model.calibration_fit import Predictor

    rows = [Timing(shape.m, shape.n, shape.k, shape.layout, key, 1.0) for key in keys]
    return float(np.sum(Predictor(profile, rows)(values))) if rows else 0.0


def run_stage(
    profile: Profile,
    time_shape: TimeShape,
    settings: StageSettings = StageSettings(),
    progress: Callable[[str, int, int], None] | None = None,
    precompile: Precompile | None = None,
    clock: Callable[[], float] = time.perf_counter,
    log: Callable[[str], None] = print,
) -> tuple[Profile, StageReport]:
    """The profile with every calibrated model parameter (old ``model_*`` metrics replaced), and what was done."""
    report = StageReport()
    begin = clock()
    values: dict[str, float] = {}
    all_timings: list[tuple[str, Timing]] = []
    probe_list = probes(profile, settings.quick)

    def step(text: str, done: int, total: int) -> None:
        if progress is not None:
            progress(text, done, total)

    if precompile is not None:
        precompile([(GemmConfig.from_key(key), Problem(m, n, k, dtype="bf16", layout=layout))
                    for probe in probe_list for m, n, k, layout, key in probe.pairs()])  # fmt: skip
        report.seconds["precompile probes"] = clock() - begin
    start = clock()
    timed: dict[str, list[Timing]] = {}
    for index, probe in enumerate(probe_list):
        step(f"model probe {probe.name}", index, len(probe_list))
        rows = [t for m, n, k, layout in probe.shapes for t in _timings(m, n, k, layout, probe.keys, time_shape)]
        all_timings += [(probe.name, t) for t in rows]
        if rows:
            timed[probe.name] = rows
        else:
            report.notes.append(f"probe {probe.name}: no timing succeeded; {probe.parameter} keeps its default")
    report.seconds["probes"] = clock() - start
    start = clock()
    measure_floors(profile, timed, values, report)
    # the probes' terms are coupled (a tiny GEMM's time holds a work item's fixed cost too): Gauss-Seidel sweeps,
    # each probe solved with the latest values of all the others
    for _ in range(PROBE_SWEEPS):
        solve_probes(profile, probe_list, timed, values, report, 0, settings.seed)
    report.seconds["probe solves"] = clock() - start
    shapes = calibration_shapes(settings.shape_count, settings.seed, settings.exclude)
    check_disjoint(shapes, settings.exclude)
    report.shapes_planned = len(shapes)
    plans = [(shape, candidate_keys(profile, shape, values)) for shape in shapes]
    start = clock()
    calibration: list[Timing] = []
    per_shape: list[float] = []
    compile_s = 0.0
    for index, (shape, keys) in enumerate(plans):
        step(f"model calibration set {shape.m}x{shape.n}x{shape.k} {shape.layout}", index, len(plans))
        expected = float(np.median(per_shape)) if per_shape else 0.0
        if clock() - begin + expected > settings.budget:
            report.notes.append(f"time budget {settings.budget:.0f} s reached after {index} of {len(plans)} shapes")
            break
        if precompile is not None and index % PRECOMPILE_CHUNK == 0:  # the next chunk's kernels, in parallel
            compile_start = clock()
            chunk = plans[index : index + PRECOMPILE_CHUNK]
            precompile([(GemmConfig.from_key(key), Problem(s.m, s.n, s.k, dtype="bf16", layout=s.layout))
                        for s, chunk_keys in chunk for key in chunk_keys])  # fmt: skip
            compile_s += clock() - compile_start
        shape_start = clock()
        rows = _timings(shape.m, shape.n, shape.k, shape.layout, keys, time_shape)
        per_shape.append(clock() - shape_start)
        calibration += rows
        all_timings += [("calibration", t) for t in rows]
    report.seconds["precompile calibration set"] = compile_s
    report.shapes_timed = len({t.shape for t in calibration})
    report.seconds["calibration set"] = clock() - start - compile_s

    start = clock()
    step("model fit", 0, 1)
    fit_all(profile, probe_list, timed, calibration, values, settings, report)
    report.seconds["fit"] = clock() - start
    step("model done", 1, 1)
    return _stored(profile, report, probe_list, shapes, all_timings, settings), report


def fit_all(
    profile: Profile,
    probe_list: Sequence[Probe],
    timed: dict[str, list[Timing]],
    calibration: Sequence[Timing],
    values: dict[str, float],
    settings: StageSettings,
    report: StageReport,
) -> None:
    """Every parameter from the timings (``values`` updated): the probes' solves, then the calibration fit."""
    report.shapes_timed = len({t.shape for t in calibration})
    if report.shapes_timed >= 4:
        # the fitted terms and the probed ones share every timing: a first fit, the probes solved again under it
        # (with their bootstrap spread), then the regularised fit with its spread and cross-validated score
        first = fit(profile, calibration, FIT_PARAMETERS, values, "level", 0, settings.seed, max_nfev=60)
        values.update(first.values)
        solve_probes(profile, probe_list, timed, values, report, settings.resamples, settings.seed)
        # the fitted ones' entries are where the fit starts: the first fit's values
        fixed = dict(values)
        calibration_fit(profile, calibration, fixed, settings.seed, settings.resamples, report)
        values.update(report.fit_result.values if report.fit_result is not None else {})
    else:
        solve_probes(profile, probe_list, timed, values, report, settings.resamples, settings.seed)
        report.notes.append(f"only {report.shapes_timed} calibration shapes timed: the fitted parameters keep their "
                            "defaults")  # fmt: skip


def calibration_fit(
    profile: Profile,
    calibration: Sequence[Timing],
    fixed: dict[str, float],
    seed: int,
    resamples: int,
    report: StageReport,
) -> None:
    """The calibration-fit parameters on the calibration timings (the probed ones ``fixed``): the regularised fit
    with its bootstrap spread, and its cross-validated score (every shape predicted by a fit that did not see it)."""
    objective = fit_objective()
    names = report.fit_names
    result, choice = fit_regularised(profile, calibration, names, fixed, objective, resamples, seed)
    report.fit_result, report.prior = result, choice
    folds = min(5, report.shapes_timed)
    if folds >= 2:  # the folds' fits keep the chosen prior weight (an inner choice per fold would cost 12x the fits)
        chosen = objective.with_prior_weight(choice.weight)
        report.holdout = cross_validate(profile, calibration, names, fixed, chosen, False, folds, seed)
        report.holdout["folds"] = folds


FLOOR_WHY = {
    "model_l2_bandwidth_scale": "the highest L2 rate one wave's K-steps reach (calibration_probes.l2_scale_floor)",
    "model_tma_stream_scale": "the highest per-SM rate one wave's TMA K-steps reach over the pointer-based read "
                              "probe's (calibration_probes.tma_stream_floor)",
    "model_short_row_read_share": "the long rows' time over the short rows' on the short-rows probe's HBM-bound weight "
                                  "streams (calibration_probes.short_row_share)",
}  # fmt: skip
# floors read off their own probe's timings alone (the others read every floor source's)
OWN_PROBE_FLOORS = ("model_short_row_read_share",)


def measure_floors(
    profile: Profile, timed: dict[str, list[Timing]], values: dict[str, float], report: StageReport
) -> None:
    """``FLOOR_PARAMETERS`` read off the one-wave probes' timings (``values`` updated; held through the solves and the
    fit): the L2 rate and TMA copies' per-SM streaming rate their K-steps demonstrably reach.  A floor no timing
    bounds keeps its default (noted)."""
    rows = [t for name in floor_sources(profile) for t in timed.get(name, [])]
    floor = floor_values(profile, rows)
    if not floor:
        report.notes.append(f"{', '.join(FLOOR_PARAMETERS)}: no one-wave probe pair timed; the defaults are kept")
        return
    for name in FLOOR_PARAMETERS:
        if name not in floor:
            report.notes.append(f"{name}: no one-wave probe pair bounds it; the default is kept")
    values.update(floor)
    for name, value in floor.items():
        report.floors[name] = FitResult({name: value}, math.nan, points=len(rows), groups=len(rows))


def solve_probes(
    profile: Profile,
    probe_list: Sequence[Probe],
    timed: dict[str, list[Timing]],
    values: dict[str, float],
    report: StageReport,
    resamples: int,
    seed: int,
) -> None:
    """One sweep: each probe's parameter solved on its timings with the current values of all others (updated)."""
    for probe in probe_list:
        # the probe's own configs: a profile calibrated under an earlier design may store more
        rows = [t for t in timed.get(probe.name, []) if t.key in probe.keys]
        if not rows or probe.mode == "floor":  # floors are read off (measure_floors), not solved
            continue
        result = fit(profile, rows, [probe.parameter], values, probe.mode, resamples, seed, by_timing=True,
                     start_inside=True)  # fmt: skip
        values[probe.parameter] = result.values[probe.parameter]
        report.probe_results[probe.parameter] = result


def _hash_shapes(shapes: Sequence[CalShape]) -> str:
    return hashlib.sha256(json.dumps([s.as_list() for s in shapes]).encode()).hexdigest()[:16]


def _measurement(name: str, result: FitResult, method: str, settings: dict[str, Any]) -> Measurement:
    value = result.values[name]
    spread = result.spread.get(name, math.nan)
    samples = result.samples.get(name) or [value]
    from theodolite.model.calibration_fit import BOUNDS, prior_center

    low, high = BOUNDS[name]
    at_bound = value <= low * 1.01 or value >= high * 0.99
    if method == METHOD_FIT and settings.get("prior_weight", 0.0) > 0:  # held at its prior (a default on a bound)
        at_bound = at_bound and not math.isclose(value, prior_center(name, {name: settings["prior"]}), rel_tol=0.01)
    cv = spread / value if value and math.isfinite(spread) else math.nan
    return Measurement(
        name=name, value=value, unit=METRICS[name].unit, method=method, samples=np.array(samples),
        p10=float(np.percentile(samples, 10)), p90=float(np.percentile(samples, 90)), cv=cv,
        settings={**settings, "residual_rms_log": result.residual_rms, "spread": spread, "points": result.points,
                  "groups": result.groups, "at_bound": at_bound},
        flagged=bool(at_bound or (math.isfinite(cv) and cv > 0.5)), note=MODEL_PARAMETERS[name][1],
    )  # fmt: skip


def _stored(
    profile: Profile,
    report: StageReport,
    probe_list: Sequence[Probe],
    shapes: Sequence[CalShape],
    timings: Sequence[tuple[str, Timing]],
    settings: StageSettings,
) -> Profile:
    metrics = {name: m for name, m in profile.metrics.items() if not name.startswith("model_")}
    by_parameter = {p.parameter: p for p in probe_list}
    for name, result in report.probe_results.items():
        probe = by_parameter[name]
        metrics[name] = _measurement(name, result, METHOD_PROBE, {
            "probe": probe.name, "mode": probe.mode, "why": probe.why, "configs": list(probe.keys),
            "shapes": [list(s) for s in probe.shapes], "solved_after": list(report.probe_results)[
                : list(report.probe_results).index(name)]})  # fmt: skip
    sources = [p for p in probe_list if p.name in floor_sources(profile)]
    for name, result in report.floors.items():
        read = [p for p in sources if p.parameter == name] if name in OWN_PROBE_FLOORS else sources
        metrics[name] = _measurement(name, result, METHOD_PROBE, {
            "probe": ", ".join(p.name for p in read), "mode": "floor",
            "why": FLOOR_WHY[name],
            "configs": [key for p in read for key in p.keys],
            "shapes": [list(s) for p in read for s in p.shapes]})  # fmt: skip
    if report.fit_result is not None:
        for name in report.fit_names:
            metrics[name] = _measurement(name, report.fit_result, METHOD_FIT, {
                "seed": settings.seed, "shapes_timed": report.shapes_timed, "shape_set": _hash_shapes(shapes),
                "fitted_together": list(report.fit_names), "holdout": report.holdout,
                "quick": settings.quick, "regret_weight": REGRET_WEIGHT, "prior": MODEL_PARAMETERS[name][0],
                "prior_weight": report.prior.weight if report.prior else 0.0,
                "prior_weight_losses": {str(w): v for w, v in (report.prior.losses if report.prior else {}).items()},
            })  # fmt: skip
    rows = [[source, t.m, t.n, t.k, t.layout, t.dtype, t.key] for source, t in timings]
    curves = dict(profile.curves)
    if timings:
        curves[TIMINGS_CURVE] = Curve(
            name=TIMINGS_CURVE, x=np.arange(len(timings), dtype=float), y=np.array([t.seconds for _, t in timings]),
            x_unit="1", y_unit="s", method="model_stage", x_label="timing", y_label="seconds per call",
            attrs={"rows": rows, "columns": ["source", "M", "N", "K", "layout", "dtype", "config"],
                   "seed": settings.seed, "shapes": [s.as_list() for s in shapes], "shape_set": _hash_shapes(shapes),
                   "quick": settings.quick},
        )  # fmt: skip
    return dataclasses.replace(profile, metrics=metrics, curves=curves)


def stored_timings(profile: Profile) -> dict[str, list[Timing]]:
    """The timings a profile's model stage stored, by source (a probe's name, or "calibration"); {} if none."""
    curve = profile.curves.get(TIMINGS_CURVE)
    if curve is None:
        return {}
    out: dict[str, list[Timing]] = {}
    for (source, m, n, k, layout, dtype, key), seconds in zip(curve.attrs["rows"], curve.y, strict=True):
        out.setdefault(source, []).append(Timing(int(m), int(n), int(k), layout, key, float(seconds), dtype))
    return out


def refit(profile: Profile, settings: StageSettings | None = None) -> tuple[Profile, StageReport]:
    """The stage's solves and fit redone on a CPU from the timings a profile stored (same probes, shapes, seed): what
    a changed fit makes of a calibration already run.  ValueError if the profile stores none."""
    stored = stored_timings(profile)
    curve = profile.curves.get(TIMINGS_CURVE)
    if not stored.get("calibration") or curve is None:
        raise ValueError(f"{profile.origin or profile.device_name}: no model calibration timings stored (curve "
                         f"{TIMINGS_CURVE}); run python -m theodolite calibrate --model-only on its GPU")  # fmt: skip
    attrs = curve.attrs
    settings = settings or StageSettings(quick=bool(attrs.get("quick", False)), seed=int(attrs["seed"]))
    bare = dataclasses.replace(
        profile, metrics={n: m for n, m in profile.metrics.items() if not n.startswith("model_")}
    )
    probe_list = probes(bare, settings.quick)
    timed = {p.name: stored[p.name] for p in probe_list if stored.get(p.name)}
    report = StageReport()
    # a probe the stored run did not have (added since): its parameter keeps that run's own measurement, as it was,
    # and the solves and the fit hold it
    kept = {p.parameter: profile.metrics[p.parameter] for p in probe_list
            if p.name not in timed and p.mode != "floor" and p.parameter in profile.metrics}  # fmt: skip
    values: dict[str, float] = {name: m.value for name, m in kept.items()}
    measure_floors(bare, timed, values, report)
    for _ in range(PROBE_SWEEPS):
        solve_probes(bare, probe_list, timed, values, report, 0, settings.seed)
    fit_all(bare, probe_list, timed, stored["calibration"], values, settings, report)
    shapes = [CalShape(str(a), int(m), int(n), int(k), str(layout)) for a, m, n, k, layout in attrs["shapes"]]
    report.shapes_planned = len(shapes)
    timings = [(source, t) for source, rows in stored.items() for t in rows]
    order = {source: i for i, source in enumerate([p.name for p in probe_list] + ["calibration"])}
    timings.sort(key=lambda item: order.get(item[0], len(order)))
    refitted = _stored(bare, report, probe_list, shapes, timings, settings)
    for name in kept:
        report.notes.append(f"{name}: no stored timings of its probe; the profile's earlier value is kept")
    return dataclasses.replace(refitted, metrics={**refitted.metrics, **kept}), report


def gpu_time_shape(budget_ms: float = 400.0) -> TimeShape:
    """The GPU timer: ``kernels.benchmark.final_round`` (checked runs, side by side, graph replay for shapes that
    fit in L2, L2-flushed runs within ``budget_ms`` otherwise), in seconds per call within a stream of work, as the
    model predicts them: a flushed shape's times less its events' bracket (``kernels.benchmark.timing_floors``,
    measured once on the first shape; ``model.evaluate.in_stream_ms`` reads validation sweeps the same way);
    configs that fail are left out."""
    from theodolite.kernels.benchmark import (
        BenchSettings,
        Timer,
        event_bracket_ms,
        final_round,
        flushed_timing,
        timing_floors,
    )

    timer = Timer()
    floor: dict[str, float] = {}

    def time_shape(m: int, n: int, k: int, layout: str, keys: Sequence[str]) -> dict[str, float]:
        import torch

        if not floor:
            floor.update(timing_floors(timer))
        times, _ = final_round(m, n, k, keys, BenchSettings(dtype="bf16", layout=layout), timer, budget_ms)
        torch.cuda.empty_cache()
        flushed = flushed_timing(2 * (m * k + k * n + m * n), timer.l2)  # bf16 inputs and output
        bracket = event_bracket_ms(floor) if flushed else 0.0
        return {
            key: max(ms - bracket, 1e-6) / 1e3 for key, ms in times.items() if key in keys and ms and math.isfinite(ms)
        }

    return time_shape


def gpu_precompile(log: Callable[[str], None]) -> Precompile:
    """Compile each (config, specialization) once, in parallel processes (the validation harness's precompile)."""
    from theodolite.validation import _precompile_pairs

    def precompile(pairs: Sequence[tuple[GemmConfig, Problem]]) -> None:
        _precompile_pairs(list(pairs), 0, log)

    return precompile


def for_calibrate(
    profile: Profile,
    quick: bool,
    progress: Callable[[str, int, int], None],
    log: Callable[[str], None] = print,
    exclude: Sequence[str] = (),
) -> tuple[Profile, dict[str, float]]:
    """calibrate's call (GPU): the stage on the current device, its seconds per step keyed "model <step>"."""
    settings = StageSettings(quick=quick, exclude=tuple(exclude))
    updated, report = run_stage(profile, gpu_time_shape(), settings, progress, gpu_precompile(log), log=log)
    for note in report.notes:
        log(f"model stage: {note}")
    return updated, {f"model {name}": seconds for name, seconds in report.seconds.items()}


def show(profile: Profile) -> str:
    """The model parameters of a profile with their method, spread and provenance, and the hold-out score."""
    lines = [f"{profile.device_name}: model parameters"]
    holdout_score: dict[str, Any] = {}
    for name in sorted(MODEL_PARAMETERS):
        m = profile.metrics.get(name)
        if m is None:
            lines.append(f"  {name:36s} {MODEL_PARAMETERS[name][0]:<11.4g} structure (code default)")
            continue
        where = m.settings.get("probe") or (f"calibration set seed {m.settings.get('seed')}" if m.method == METHOD_FIT
                                            else ", ".join(m.settings.get("results", [])))  # fmt: skip
        spread = m.settings.get("spread", math.nan)
        rms = m.settings.get("residual_rms_log", math.nan)
        flag = "  FLAG" if m.flagged else ""
        lines.append(f"  {name:36s} {m.value:<11.4g} {m.method:18s} spread {float(spread):<9.3g} "
                     f"log-rms {float(rms):.3f}  ({where}){flag}")  # fmt: skip
        holdout_score = dict(m.settings.get("holdout") or holdout_score)
    if holdout_score:
        lines.append(f"cross-validated ({holdout_score.pop('folds', '?')} shape folds: each shape predicted by a fit "
                     "that did not see it): "
                     + ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}"
                                 for k, v in holdout_score.items()))  # fmt: skip
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m theodolite.probes.model_stage", description=__doc__.split("\n")[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--show", metavar="PROFILE", help="print a profile's model parameters")
    group.add_argument(
        "--refit", metavar="PROFILE", help="redo the stage's fit from the profile's stored timings (CPU)"
    )
    parser.add_argument("-o", "--output", default=None, help="with --refit: write here (default: replace PROFILE)")
    args = parser.parse_args(argv)
    from theodolite.profile import load_profile, save_profile

    if args.show:
        print(show(load_profile(args.show)))
        return 0
    updated, report = refit(load_profile(args.refit))
    save_profile(updated, args.output or args.refit, overwrite=True)
    print(show(updated))
    print(f"refitted from {report.shapes_timed} calibration shapes' stored timings -> {args.output or args.refit}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
