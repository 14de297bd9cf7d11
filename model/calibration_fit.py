"""Model parameters from timings of the bundled kernels: probes solve one parameter each, a fit the rest.

Pure (numpy/scipy, no GPU): the timings come in as ``Timing`` rows (a shape, a config key, seconds), so the
calibrate stage (``theodolite.probes.model_stage``) and the CPU tests share every line here.

Each parameter is determined by least squares of log(predicted / measured) over its timings (``mode``
"level"), or of the log of the difference between the timings of a shape pair that differ only in K
(``mode`` "slope": a per-K-step cost with the fixed costs cancelled), or of the difference between split-K configs
of one tile whose slices each run the same K-steps (``mode`` "split": what one more slice's partial costs the
reduction, the K-steps cancelled).  The model is evaluated on the
vectorised config table (``model.predict.evaluate``) with the parameters as process-wide overrides that are
restored afterwards, so nothing leaks into selection.  The spread of each parameter is the standard deviation of
its value over bootstrap resamples of the groups (shapes of the calibration set, pairs of a probe); the hold-out
score fits on half the shapes and scores the other half.
"""

from __future__ import annotations

import contextlib
import math
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from theodolite.kernels.config import GemmConfig, Problem
from theodolite.model import hardware as hardware_module
from theodolite.model.predict import ConfigTable, evaluate

from theodolite.profile.schema import Profile

# (lower, upper) of each calibrated parameter: wide physical ranges, positive (the schema stores values > 0)
BOUNDS: dict[str, tuple[float, float]] = {
    "model_launch_extra": (1e-9, 2e-5),
    "model_tma_launch_extra": (1e-9, 2e-5),
    "model_iteration_overhead": (0.5, 5000.0),
    "model_tile_overhead": (1.0, 20000.0),
    "model_zero_fill_cycles": (0.01, 200.0),
    "model_splitk_reduce_cost": (0.05, 20.0),
    "model_scalar_load_cost": (0.1, 50.0),
    "model_scalar_k_load_share": (0.02, 10.0),
    "model_scalar_round_trips": (0.25, 8.0),
    "model_narrow_copy_cycles": (0.01, 64.0),
    "model_latency_hiding": (0.02, 1.0),
    "model_tma_latency_hiding": (0.02, 1.0),
    "model_mma_small_rate": (0.02, 1.0),
    "model_short_row_read_share": (0.2, 1.0),
    "model_l2_bandwidth_scale": (0.2, 5.0),
    "model_tma_l2_bandwidth_scale": (0.2, 5.0),
    "model_tma_stream_scale": (1.0, 5.0),
    "model_hbm_bandwidth_scale": (0.2, 2.0),
    "model_flatten_hiding": (0.01, 1.0),
    "model_streamk_reduce_cost": (0.05, 20.0),
    "model_tma_iteration_overhead": (0.01, 2000.0),
    "model_composite_iteration_overhead": (0.01, 2000.0),
}


@dataclass(frozen=True)
class Timing:
    """One measured (shape, config): seconds per call as the harness timed it."""

    m: int
    n: int
    k: int
    layout: str
    key: str
    seconds: float
    dtype: str = "bf16"

    @property
    def problem(self) -> Problem:
        return Problem(self.m, self.n, self.k, dtype=self.dtype, layout=self.layout)

    @property
    def shape(self) -> tuple[int, int, int, str, str]:
        return (self.m, self.n, self.k, self.layout, self.dtype)


@dataclass
class FitResult:
    """Fitted values with how well they are determined."""

    values: dict[str, float]
    residual_rms: float  # RMS of the residuals (log ratio) at the solution
    spread: dict[str, float] = field(default_factory=dict)  # bootstrap standard deviation per parameter
    samples: dict[str, list[float]] = field(default_factory=dict)  # the bootstrap values
    points: int = 0
    groups: int = 0


@contextlib.contextmanager
def overrides(values: Mapping[str, float]) -> Iterator[None]:
    """Model parameters as overrides inside the block only (the earlier overrides restored after, no cache touched:
    the tables built inside are private to the caller)."""
    saved = dict(hardware_module._OVERRIDES)
    hardware_module._OVERRIDES.update({name: float(value) for name, value in values.items()})
    try:
        yield
    finally:
        hardware_module._OVERRIDES.clear()
        hardware_module._OVERRIDES.update(saved)


@contextlib.contextmanager
def floors(lower: Mapping[str, float]) -> Iterator[None]:
    """Parameters' lower bounds raised inside the block only: a probe's measurement that rules out smaller values
    (``calibration_probes.l2_scale_floor``) binds every fit made inside, the cross-validation's included."""
    saved = dict(BOUNDS)
    for name, value in lower.items():
        low, high = BOUNDS[name]
        BOUNDS[name] = (min(max(low, float(value)), high), high)
    try:
        yield
    finally:
        BOUNDS.clear()
        BOUNDS.update(saved)


class Predictor:
    """Predicted seconds of a fixed list of timings under any parameter values (one table build per call)."""

    def __init__(self, profile: Profile, timings: Sequence[Timing]) -> None:
        self.profile = profile
        self.timings = list(timings)
        self.by_shape: dict[tuple[int, int, int, str, str], list[int]] = {}
        for i, t in enumerate(self.timings):
            self.by_shape.setdefault(t.shape, []).append(i)
        self.measured = np.array([t.seconds for t in self.timings], dtype=float)
        keys: dict[str, dict[str, None]] = {}
        for t in self.timings:
            keys.setdefault(t.dtype, {})[t.key] = None
        # every timed config, priced beside the space (a probe's twin config need not be one selection offers)
        self.configs = {dtype: tuple(GemmConfig.from_key(key) for key in found) for dtype, found in keys.items()}

    def __call__(self, values: Mapping[str, float]) -> np.ndarray:
        out = np.empty(len(self.timings))
        with overrides(values):
            tables: dict[str, ConfigTable] = {}
            for shape, rows in self.by_shape.items():
                dtype = shape[4]
                table = tables.get(dtype) or tables.setdefault(
                    dtype, ConfigTable(self.profile, dtype, extra=self.configs.get(dtype, ()))
                )
                times, _ = evaluate(table, self.timings[rows[0]].problem)
                for i in rows:
                    index = table.index.get(self.timings[i].key)
                    if index is None:
                        raise KeyError(f"config {self.timings[i].key} is not in the {dtype} config space")
                    out[i] = times[index]
        return out


def slope_pairs(timings: Sequence[Timing]) -> list[tuple[int, int]]:
    """Index pairs (shorter K, longer K) of timings of one config on shapes that differ only in K."""
    groups: dict[tuple[int, int, str, str, str], list[int]] = {}
    for i, t in enumerate(timings):
        groups.setdefault((t.m, t.n, t.layout, t.dtype, t.key), []).append(i)
    pairs = []
    for rows in groups.values():
        rows = sorted(rows, key=lambda i: timings[i].k)
        pairs += [(a, b) for a, b in zip(rows, rows[1:], strict=False) if timings[a].k < timings[b].k]
    return pairs


def split_pairs(timings: Sequence[Timing]) -> list[tuple[int, int]]:
    """Index pairs (fewer slices, more slices) of split-K timings of one tile, shape and load class whose slices each
    run the same whole number of K-steps (K grown with the split): the pair differs by the slices' partials alone."""
    groups: dict[tuple[object, ...], list[tuple[int, int]]] = {}
    for i, t in enumerate(timings):
        cfg = GemmConfig.from_key(t.key)
        steps = -(-t.k // cfg.block_k)
        if cfg.split_k < 2 or steps % cfg.split_k:
            continue  # unsplit, or slices of unequal K-steps: no clean pair
        family = "/".join(part for part in t.key.split("/") if part != f"k{cfg.split_k}")
        key = (t.m, t.n, t.layout, t.dtype, family, steps // cfg.split_k)
        groups.setdefault(key, []).append((cfg.split_k, i))
    pairs = []
    for rows in groups.values():
        rows.sort()
        pairs += [(a, b) for (sa, a), (sb, b) in zip(rows, rows[1:], strict=False) if sa < sb]
    return pairs


def flat_pairs(timings: Sequence[Timing]) -> list[tuple[int, int]]:
    """Index pairs (flattened, plain) of one config's timings on one shape, the pair differing only in the flattened
    tile loop (``GemmConfig.flatten``, keys ending ``/f``): the plain one's time less the flat one's is what the flat
    loop hides of its work items' fixed costs."""
    plain = {(t.m, t.n, t.k, t.layout, t.dtype, t.key): i for i, t in enumerate(timings)}
    pairs = []
    for i, t in enumerate(timings):
        if t.key.endswith("/f"):
            j = plain.get((t.m, t.n, t.k, t.layout, t.dtype, t.key[: -len("/f")]))
            if j is not None:
                pairs.append((i, j))
    return pairs


# mode -> the timing pairs whose differences it fits
PAIRED_MODES = {"slope": slope_pairs, "split": split_pairs, "flat": flat_pairs}


def residuals(
    predicted: np.ndarray, measured: np.ndarray, mode: str, pairs: Sequence[tuple[int, int]] = ()
) -> np.ndarray:
    """log(predicted / measured) per timing ("level") or per pair's difference ("slope", "split", "flat")."""
    if mode == "level":
        return np.log(np.maximum(predicted, 1e-12) / measured)
    if mode in PAIRED_MODES:
        lo = np.array([a for a, _ in pairs], dtype=int)
        hi = np.array([b for _, b in pairs], dtype=int)
        floor = 1e-3 * measured[hi]  # a measured difference at or below noise still scores (as a small one)
        return np.log(np.maximum(predicted[hi] - predicted[lo], floor) / np.maximum(measured[hi] - measured[lo], floor))
    raise ValueError(f"unknown residual mode {mode!r} (level, slope, split or flat)")


@dataclass(frozen=True)
class Objective:
    """What a level fit minimises beyond log(predicted / measured) of every timing.

    ``regret``: weight of each shape's smooth selection regret, sum_i softmin_i(log predicted / ``temperature``) x
    log(measured_i / fastest measured): zero when the model ranks the measured best far ahead, so a fit that trades a
    little absolute accuracy for the right order of the near-best configs scores better (the level term keeps
    predicted / measured calibrated).  ``prior_weight``: each fitted parameter's log distance from ``prior`` (the
    structural defaults) enters as sqrt(weight) x log(value / prior), a log-normal prior, so a parameter the timings
    do not determine stays near its default instead of running to a bound."""

    regret: float = 0.0
    temperature: float = 0.05
    prior_weight: float = 0.0
    prior: Mapping[str, float] = field(default_factory=dict)

    def with_prior_weight(self, weight: float) -> Objective:
        return Objective(self.regret, self.temperature, weight, self.prior)


LEVEL = Objective()


def shape_regret(log_predicted: np.ndarray, log_measured: np.ndarray, temperature: float) -> float:
    """Expected log(measured / fastest measured) of a pick drawn softmin(log predicted / temperature): the smooth
    surrogate of picking the predicted fastest (0: the measured best predicted fastest by a wide margin)."""
    z = -(log_predicted - log_predicted.min()) / temperature
    weights = np.exp(z)
    weights /= weights.sum()
    return float(np.sum(weights * (log_measured - log_measured.min())))


def data_residuals(
    predicted: np.ndarray, measured: np.ndarray, groups: Sequence[np.ndarray], objective: Objective
) -> np.ndarray:
    """The level residuals of every timing of ``groups`` (a shape's timing indices each, repeats allowed: a
    bootstrap draw), then sqrt(regret weight) x each shape's regret."""
    logs = np.log(np.maximum(predicted, 1e-12) / measured)
    parts = [logs[g] for g in groups]
    if objective.regret > 0:
        lp, lm = np.log(np.maximum(predicted, 1e-12)), np.log(measured)
        scale, temperature = math.sqrt(objective.regret), objective.temperature
        parts.append(np.array([scale * shape_regret(lp[g], lm[g], temperature) for g in groups if len(g) > 1]))
    return np.concatenate(parts) if parts else np.zeros(0)


def prior_center(name: str, prior: Mapping[str, float]) -> float:
    """The prior's value of a parameter inside its bounds (a default of 0, no term, is the lower bound)."""
    low, high = BOUNDS[name]
    return min(max(prior[name], low), high)


LOG_STEP = 1e-3  # forward-difference step in log-parameter space: 0.1% of a parameter's value, whatever the value


def log_step_jacobian(
    function: Callable[[np.ndarray], np.ndarray], x: np.ndarray, upper: np.ndarray, f0: np.ndarray | None = None
) -> np.ndarray:
    """Forward differences of ``function`` at ``x`` (log-parameters) with a step of ``LOG_STEP`` each, backwards at an
    upper bound.  scipy's relative step (``diff_step``) scales with |x|: at a parameter of exactly 1 (x = 0) it falls to
    1e-8, the model's piecewise terms give a zero slope there and the solve stops where it first lands (an H100 split-K
    probe stopped at 1.0 where its minimum is 1.6)."""
    f0 = function(x) if f0 is None else f0
    jac = np.empty((f0.size, x.size))
    for j in range(x.size):
        step = LOG_STEP if x[j] + LOG_STEP <= upper[j] else -LOG_STEP
        moved = x.copy()
        moved[j] += step
        jac[:, j] = (function(moved) - f0) / step
    return jac


def _solve(
    predictor: Predictor,
    names: Sequence[str],
    base: Mapping[str, float],
    start: Mapping[str, float],
    rows: np.ndarray,
    mode: str,
    pairs: Sequence[tuple[int, int]],
    max_nfev: int,
    objective: Objective = LEVEL,
    groups: Sequence[np.ndarray] | None = None,
) -> tuple[dict[str, float], float]:
    """Least squares in log-parameter space over the timings ``rows`` (paired modes: the pairs inside them; level mode
    with ``groups``: those shapes' timings, with the objective's regret and prior terms)."""
    from scipy.optimize import least_squares

    lower = np.log([BOUNDS[name][0] for name in names])
    upper = np.log([BOUNDS[name][1] for name in names])
    x0 = np.clip(np.log([max(start[name], 1e-300) for name in names]), lower + 1e-9, upper - 1e-9)
    keep = set(int(i) for i in rows)
    chosen = [p for p in pairs if p[0] in keep and p[1] in keep]
    prior_names = [name for name in names if name in objective.prior] if objective.prior_weight > 0 else []
    center = np.log([prior_center(name, objective.prior) for name in prior_names])
    prior_at = np.array([list(names).index(name) for name in prior_names], dtype=int)

    def data(x: np.ndarray) -> np.ndarray:
        values = {**base, **{name: float(math.exp(v)) for name, v in zip(names, x, strict=True)}}
        predicted = predictor(values)
        if mode in PAIRED_MODES:
            return residuals(predicted, predictor.measured, mode, chosen)
        if groups is not None:
            return data_residuals(predicted, predictor.measured, groups, objective)
        return residuals(predicted[rows], predictor.measured[rows], mode)

    last: dict[bytes, np.ndarray] = {}  # the solver's latest point: its Jacobian starts from it

    def function(x: np.ndarray) -> np.ndarray:
        key = x.tobytes()
        if key not in last:
            value = data(x)
            if prior_names:
                value = np.concatenate([value, math.sqrt(objective.prior_weight) * (x[prior_at] - center)])
            last.clear()
            last[key] = value
        return last[key]

    solution = least_squares(function, x0, jac=lambda x: log_step_jacobian(function, x, upper), bounds=(lower, upper),
                             method="trf", x_scale=1.0, max_nfev=max_nfev, loss="soft_l1", f_scale=0.3)  # fmt: skip
    values = {name: float(math.exp(v)) for name, v in zip(names, solution.x, strict=True)}
    final = (
        data(solution.x)
        if groups is None
        else data_residuals(predictor({**base, **values}), predictor.measured, groups, LEVEL)
    )  # the level residuals alone
    return values, float(np.sqrt(np.mean(final**2))) if final.size else math.nan


def inner_starts(names: Sequence[str], start: Mapping[str, float]) -> list[dict[str, float]]:
    """Starts inside the bounds for a solve whose start is on one: a quarter, half and three quarters of the way
    between the bounds in log and the arithmetic middle, for each parameter at a bound (the others at ``start``).
    The model's terms can be flat in a parameter near both bounds (a latency share: at 1.0 every probe step bound by
    something else, at 0.14 the wait floored), and a solve started there never moves (H100's synthetic TMA
    stage probe: stuck at 1.0 and at the geometric middle 0.14, found 0.575 from 0.5)."""
    out = []
    for name in names:
        low, high = BOUNDS[name]
        if low * 1.01 < start[name] < high * 0.99:
            continue
        for value in (*(low * (high / low) ** f for f in (0.25, 0.5, 0.75)), (low + high) / 2.0):
            out.append({**start, name: value})
    return out


def fit(
    profile: Profile,
    timings: Sequence[Timing],
    names: Sequence[str],
    base: Mapping[str, float] | None = None,
    mode: str = "level",
    bootstrap: int = 8,
    seed: int = 0,
    max_nfev: int = 60,
    by_timing: bool = False,
    objective: Objective = LEVEL,
    predictor: Predictor | None = None,
    start_inside: bool = False,
) -> FitResult:
    """Fit ``names`` to the timings (others at ``base``, else the profile's/defaults); bootstrap over groups.

    Groups are shapes (level; ``by_timing``: single timings, for a probe of few shapes) or pairs (slope, split, flat): a
    resample draws them with replacement, so the spread says how much the value depends on which were timed.
    ``objective`` (level mode by shape): the regret and prior terms beyond the level residuals.  ``start_inside``: where
    a parameter's current value is on a bound, solves from inside the bounds as well (``inner_starts``; a probe's
    solve of one parameter) and keeps the best."""
    base = dict(base or {})
    with overrides(base):
        current = hardware_module.current_parameters(profile)
    start = {name: current[name] if current[name] > 0 else math.sqrt(BOUNDS[name][0] * BOUNDS[name][1])
             for name in names}  # fmt: skip
    predictor = predictor if predictor is not None else Predictor(profile, timings)
    pairs = PAIRED_MODES[mode](timings) if mode in PAIRED_MODES else []
    if mode == "slope" and not pairs:
        raise ValueError("slope mode needs timings of one config on shapes that differ only in K")
    if mode == "split" and not pairs:
        raise ValueError("split mode needs split-K timings of one tile whose slices run equal K-steps at two splits")
    if mode == "flat" and not pairs:
        raise ValueError("flat mode needs timings of a flattened config and its plain twin on one shape")
    everything = np.arange(len(timings))
    shaped = mode == "level" and not by_timing
    shape_groups = [np.array(g, dtype=int) for g in predictor.by_shape.values()]
    values, rms = _solve(predictor, names, base, start, everything, mode, pairs, max_nfev, objective,
                         shape_groups if shaped else None)  # fmt: skip
    if start_inside:  # solves from inside the bounds too, the best kept
        for inner in inner_starts(names, start):
            found, found_rms = _solve(predictor, names, base, inner, everything, mode, pairs, max_nfev, objective,
                                      shape_groups if shaped else None)  # fmt: skip
            if found_rms < rms * (1.0 - 1e-6):
                values, rms = found, found_rms

    if mode in PAIRED_MODES:
        groups = [list(p) for p in pairs]
    else:
        groups = [[int(i)] for i in everything] if by_timing else list(predictor.by_shape.values())
    rng = random.Random(seed)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for _ in range(bootstrap if len(groups) > 1 else 0):
        drawn = [groups[rng.randrange(len(groups))] for _ in groups]
        rows = np.array(sorted({i for group in drawn for i in group}), dtype=int)
        weights = np.concatenate([np.array(group, dtype=int) for group in drawn])  # duplicates weigh double
        resample, _ = _solve(predictor, names, base, values, weights if mode == "level" else rows, mode, pairs,
                             max(10, max_nfev // 2), objective,
                             [np.array(g, dtype=int) for g in drawn] if shaped else None)  # fmt: skip
        for name in names:
            samples[name].append(resample[name])
    spread = {name: float(np.std(samples[name])) if samples[name] else math.nan for name in names}
    return FitResult(values, rms, spread, samples, len(timings), len(groups))


def split_shapes(timings: Sequence[Timing], seed: int = 0) -> tuple[list[Timing], list[Timing]]:
    """The timings cut in two halves by shape (seeded): every config of a shape on the same side."""
    shapes = sorted({t.shape for t in timings})
    random.Random(seed).shuffle(shapes)
    first = set(shapes[: len(shapes) // 2])
    return [t for t in timings if t.shape in first], [t for t in timings if t.shape not in first]


def selection_score(profile: Profile, timings: Sequence[Timing], values: Mapping[str, float]) -> dict[str, float]:
    """How the model under ``values`` does on timings it may not have seen: log-RMS of predicted / measured over all
    of them, and per shape the efficiency of its pick among the timed configs (best time / the pick's time),
    summarised as geomean, p5 and min; the median predicted / measured of the picks."""
    predictor = Predictor(profile, timings)
    predicted = predictor(values)
    logs = np.log(predicted / predictor.measured)
    efficiencies, ratios = [], []
    for rows in predictor.by_shape.values():
        pick = min(rows, key=lambda i: predicted[i])
        efficiencies.append(min(predictor.measured[i] for i in rows) / predictor.measured[pick])
        ratios.append(predicted[pick] / predictor.measured[pick])
    return score_summary(efficiencies, ratios, logs)


def score_summary(efficiencies: Sequence[float], ratios: Sequence[float], logs: np.ndarray) -> dict[str, float]:
    """A selection score from its parts: per shape the pick's efficiency and predicted / measured, and every timing's
    log(predicted / measured)."""
    eff = np.array(efficiencies)
    return {
        "log_rms": float(np.sqrt(np.mean(logs**2))),
        "geomean": float(np.exp(np.mean(np.log(eff)))),
        "p5": float(np.percentile(eff, 5)),
        "min": float(eff.min()),
        "abs_median": float(np.median(ratios)),
        "shapes": len(efficiencies),
    }


def holdout(
    profile: Profile,
    timings: Sequence[Timing],
    names: Sequence[str],
    base: Mapping[str, float] | None = None,
    seed: int = 0,
    max_nfev: int = 60,
) -> dict[str, float]:
    """Fit on half the shapes, score on the other half (``selection_score``): the out-of-sample check of the fit."""
    train, test = split_shapes(timings, seed)
    if not train or not test:
        raise ValueError("the hold-out split needs timings of at least two shapes")
    result = fit(profile, train, names, base, bootstrap=0, max_nfev=max_nfev)
    score = selection_score(profile, test, {**(base or {}), **result.values})
    score["train_shapes"] = len({t.shape for t in train})
    return score
