"""Pure analysis of probe data: outliers, summaries, knees, staircases, latency classes.

Nothing here touches a GPU; every function is tested on the CPU with synthetic curves whose
answers are known (tests/probes/test_probe_analysis.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from theodolite.profile.schema import Measurement

# Outlier rule (stated once, used everywhere): a sample whose modified z-score
# 0.6745 * |x - median| / MAD exceeds 3.5 is rejected (Iglewicz and Hoaglin), as long as at least
# three samples remain.  With MAD = 0 nothing is rejected.
OUTLIER_Z = 3.5
DEFAULT_CV_THRESHOLD = 0.03
DEFAULT_REPEATS = 5
DEFAULT_RETRIES = 2


def reject_outliers(samples: Sequence[float] | np.ndarray, z: float = OUTLIER_Z) -> tuple[np.ndarray, np.ndarray]:
    """(kept samples, boolean mask of the rejected ones) by the modified z-score rule."""
    array = np.asarray(samples, dtype=np.float64).reshape(-1)
    rejected = np.zeros(array.shape, dtype=bool)
    finite = np.isfinite(array)
    rejected |= ~finite
    values = array[finite]
    if values.size < 4:
        return values, rejected
    median = float(np.median(values))
    mad = float(np.median(np.abs(values - median)))
    if mad == 0.0:
        return values, rejected
    score = 0.6745 * np.abs(array - median) / mad
    out = finite & (score > z)
    if int((~out & finite).sum()) < 3:
        return values, rejected
    rejected |= out
    return array[~rejected], rejected


def summarize(
    name: str,
    samples: Sequence[float] | np.ndarray,
    unit: str,
    method: str,
    *,
    settings: Mapping[str, Any] | None = None,
    cv_threshold: float = DEFAULT_CV_THRESHOLD,
    method_version: str = "1",
    note: str = "",
) -> Measurement:
    """Measurement of the samples after outlier rejection; the note says how many were dropped."""
    kept, rejected = reject_outliers(samples)
    n_rejected = int(rejected.sum())
    if n_rejected:
        note = (note + "; " if note else "") + f"{n_rejected} outlier(s) rejected (modified z > {OUTLIER_Z})"
    return Measurement.from_samples(
        name,
        kept,
        unit,
        method,
        method_version=method_version,
        settings=settings,
        cv_threshold=cv_threshold,
        note=note,
    )


def measure_with_retries(
    sample_once: Callable[[], float],
    name: str,
    unit: str,
    method: str,
    *,
    repeats: int = DEFAULT_REPEATS,
    retries: int = DEFAULT_RETRIES,
    cv_threshold: float = DEFAULT_CV_THRESHOLD,
    settings: Mapping[str, Any] | None = None,
    method_version: str = "1",
    note: str = "",
) -> Measurement:
    """Take ``repeats`` samples; while the CV exceeds the threshold, retake them (up to ``retries`` times).

    The retry with the lowest CV is kept; if even that one is above the threshold the measurement
    comes back flagged (Measurement.flagged), never silently kept.
    """
    best: Measurement | None = None
    for attempt in range(retries + 1):
        samples = [float(sample_once()) for _ in range(max(1, repeats))]
        extra = f"attempt {attempt + 1}/{retries + 1}"
        current = summarize(
            name,
            samples,
            unit,
            method,
            settings=settings,
            cv_threshold=cv_threshold,
            method_version=method_version,
            note=(note + "; " if note else "") + extra,
        )
        if best is None or current.cv < best.cv:
            best = current
        if not current.flagged:
            break
    assert best is not None
    return best


def _interp_log_crossing(x0: float, y0: float, x1: float, y1: float, level: float) -> float:
    """x (interpolated in log x) where the segment (x0,y0)-(x1,y1) crosses ``level``."""
    if y1 == y0:
        return x1
    t = (level - y0) / (y1 - y0)
    t = min(max(t, 0.0), 1.0)
    return float(math.exp(math.log(x0) + t * (math.log(x1) - math.log(x0))))


def knee(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray, *, falling: bool = True) -> float:
    """The size at which a cache plateau ends: where the curve crosses half-way from plateau to tail.

    For a bandwidth-vs-working-set curve (``falling=True``) the plateau is the high level (median of
    the points within 10% of the maximum of a 3-point running median) and the tail the median of the
    last quarter of the points; the knee is the first x beyond the plateau's peak where y drops below
    the midpoint, interpolated in log x.  For a latency curve pass ``falling=False``.  Raises
    ValueError when there is no step (the tail within 15% of the plateau).
    """
    xs = np.asarray(x, dtype=np.float64)
    ys = np.asarray(y, dtype=np.float64)
    if xs.size != ys.size or xs.size < 4:
        raise ValueError("knee needs at least 4 points with matching x and y")
    order = np.argsort(xs)
    xs, ys = xs[order], ys[order]
    if not falling:
        ys = -ys
    smooth = ys.copy()
    for i in range(1, ys.size - 1):
        smooth[i] = np.median(ys[i - 1 : i + 2])
    peak_index = int(np.argmax(smooth))
    top = smooth[peak_index]
    tail_count = max(2, xs.size // 4)
    tail = float(np.median(ys[-tail_count:]))
    plateau = float(np.median(smooth[smooth >= top - 0.1 * abs(top)]))
    if abs(plateau - tail) < 0.15 * abs(plateau):
        raise ValueError("curve has no knee: the tail stays within 15% of the plateau")
    level = 0.5 * (plateau + tail)
    for i in range(peak_index, xs.size - 1):
        if smooth[i] >= level > smooth[i + 1]:
            # refine on the raw points around the crossing
            return _interp_log_crossing(xs[i], smooth[i], xs[i + 1], smooth[i + 1], level)
    raise ValueError("curve never crosses half-way between plateau and tail")


def saturation_point(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray, fraction: float = 0.9) -> float:
    """Smallest x (linearly interpolated) at which y first reaches ``fraction`` of its maximum."""
    xs = np.asarray(x, dtype=np.float64)
    ys = np.asarray(y, dtype=np.float64)
    order = np.argsort(xs)
    xs, ys = xs[order], ys[order]
    target = fraction * float(np.max(ys))
    for i in range(xs.size):
        if ys[i] >= target:
            if i == 0:
                return float(xs[0])
            t = (target - ys[i - 1]) / (ys[i] - ys[i - 1])
            return float(xs[i - 1] + t * (xs[i] - xs[i - 1]))
    return float(xs[-1])


# The saturating curve fitted to a rate-against-units sweep (read bandwidth against SMs):
#   y(x) = B * v / (1 + v**n) ** (1/n),   v = r * x**a / B
# a soft minimum of a ramp r * x**a (a <= 1: the per-SM rate falls a little as SMs start to share the memory system)
# and the plateau B, joined with sharpness n.  Four parameters over the 13-point sweep: the bundled H100 and H200
# curves fit to 0.24% and 0.68% RMS; the symmetric form (a = 1) leaves 2% systematic residuals on the H200.
SATURATION_FIT_RESIDUAL = 0.03  # relative RMS residual above which the fit is flagged as not describing the curve


@dataclass(frozen=True)
class SaturationFit:
    """The fitted saturating curve and its ``fraction`` point (continuous in the data, unlike a grid crossing)."""

    point: float  # x at which the fitted curve reaches ``fraction`` of its value at the largest x
    plateau: float  # B
    rate: float  # r: the rate of one unit
    exponent: float  # a
    sharpness: float  # n
    residual: float  # RMS of fitted / measured - 1 over the points
    fraction: float

    def __call__(self, x: float | np.ndarray) -> np.ndarray:
        return _soft_min(np.asarray(x, dtype=np.float64), self.plateau, self.rate, self.exponent, self.sharpness)


def _soft_min(x: np.ndarray, plateau: float, rate: float, exponent: float, sharpness: float) -> np.ndarray:
    v = rate * np.power(x, exponent) / plateau
    return plateau * v / np.power(1.0 + np.power(v, sharpness), 1.0 / sharpness)


def saturation_fit(
    x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray, fraction: float = 0.9
) -> SaturationFit:
    """Fit the saturating curve above (least squares of relative residuals) and return it with the x at which it
    reaches ``fraction`` of its value at the largest x (the curve's best, smoothed).

    Why a fit and not the first grid crossing: the crossing sits where the curve is flat (a few % per 16 SMs), so a
    0.5% error of one point moved the interpolated crossing by ~3%, and a coarse grid by up to 10%; the fit pools
    every point, and a small shift of the curve moves the point by a small amount.  Raises ValueError on fewer than 5
    points, non-positive values or a fit that does not converge."""
    from scipy.optimize import brentq, least_squares

    xs = np.asarray(x, dtype=np.float64).reshape(-1)
    ys = np.asarray(y, dtype=np.float64).reshape(-1)
    if xs.size != ys.size or xs.size < 5:
        raise ValueError(f"saturation_fit needs at least 5 points with matching x and y, got {xs.size} and {ys.size}")
    if not (np.all(np.isfinite(xs)) and np.all(np.isfinite(ys)) and np.all(xs > 0) and np.all(ys > 0)):
        raise ValueError("saturation_fit needs finite, positive x and y")
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"fraction must lie in (0, 1), got {fraction}")
    order = np.argsort(xs)
    xs, ys = xs[order], ys[order]
    first_rate = ys[0] / xs[0]
    top = float(np.max(ys))
    start = np.log([top, first_rate, 1.0, 3.0])
    lower = np.log([0.5 * top, 0.2 * first_rate, 0.5, 0.5])
    upper = np.log([2.0 * top, 5.0 * first_rate, 1.2, 50.0])

    def residuals(p: np.ndarray) -> np.ndarray:
        plateau, rate, exponent, sharpness = np.exp(p)
        return _soft_min(xs, plateau, rate, exponent, sharpness) / ys - 1.0

    solution = least_squares(residuals, start, bounds=(lower, upper))
    if not solution.success or not np.all(np.isfinite(solution.x)):
        raise ValueError(f"saturation fit did not converge: {solution.message}")
    plateau, rate, exponent, sharpness = (float(v) for v in np.exp(solution.x))
    fitted_top = float(_soft_min(xs[-1:], plateau, rate, exponent, sharpness)[0])
    target = fraction * fitted_top

    def gap(t: float) -> float:
        return float(_soft_min(np.array([t]), plateau, rate, exponent, sharpness)[0]) - target

    # saturated at the first point already: that point (as the old crossing did)
    point = float(xs[0]) if gap(xs[0]) >= 0.0 else float(brentq(gap, xs[0], xs[-1], xtol=1e-9))
    return SaturationFit(
        point=point,
        plateau=plateau,
        rate=rate,
        exponent=exponent,
        sharpness=sharpness,
        residual=float(np.sqrt(np.mean(solution.fun**2))),
        fraction=fraction,
    )


def unshared_rates(
    x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray, fraction: float = 0.5
) -> np.ndarray:
    """Per-unit rates y/x of a rate-against-units curve where the units do not yet share the resource: the
    points below ``fraction`` of the curve's maximum (at least the point with the fewest units)."""
    xs = np.asarray(x, dtype=np.float64)
    ys = np.asarray(y, dtype=np.float64)
    if xs.size == 0 or xs.size != ys.size or np.any(xs <= 0):
        raise ValueError("unshared_rates needs matching, non-empty x and y with x > 0")
    order = np.argsort(xs)
    xs, ys = xs[order], ys[order]
    keep = ys < fraction * float(np.max(ys))
    keep[0] = True
    return ys[keep] / xs[keep]


@dataclass(frozen=True)
class StaircaseFit:
    """time(p) = base + step * ceil(p / width): width is the programs one wave holds."""

    width: int
    base: float
    step: float
    residual: float  # RMS residual relative to the step height


def fit_staircase(
    programs: Sequence[int] | np.ndarray,
    times: Sequence[float] | np.ndarray,
    *,
    min_width: int = 1,
    max_width: int | None = None,
) -> StaircaseFit:
    """Fit the wave staircase of a fixed-work-per-program kernel and return its wave width.

    Every candidate width is fitted by least squares (base and step >= 0) and the one with the
    smallest residual wins; ties go to the larger width (a width that divides the true one fits
    worse, since its extra steps are not in the data).
    """
    ps = np.asarray(programs, dtype=np.float64)
    ts = np.asarray(times, dtype=np.float64)
    if ps.size != ts.size or ps.size < 3:
        raise ValueError("staircase fit needs at least 3 points")
    upper = int(max_width if max_width is not None else ps.max())
    best: StaircaseFit | None = None
    best_sse = math.inf
    for width in range(max(1, min_width), upper + 1):
        waves = np.ceil(ps / width)
        design = np.stack([np.ones_like(waves), waves], axis=1)
        coef, *_ = np.linalg.lstsq(design, ts, rcond=None)
        base, step = float(coef[0]), float(coef[1])
        if step <= 0:
            continue
        sse = float(np.sum((design @ coef - ts) ** 2))
        if sse < best_sse * (1 - 1e-9) or (best is not None and sse <= best_sse * (1 + 1e-9)):
            best_sse = sse
            rms = math.sqrt(sse / ps.size)
            best = StaircaseFit(width=width, base=base, step=step, residual=rms / step)
    if best is None:
        raise ValueError("no staircase fits: time does not grow with the number of programs")
    return best


@dataclass(frozen=True)
class LatencyClasses:
    """Two latency classes of per-hop samples (near and far), or one when no split is real."""

    near: float
    far: float
    far_share: float
    separated: bool
    threshold: float


def latency_classes(
    values: Sequence[float] | np.ndarray, *, min_share: float = 0.05, min_gap: float = 0.15
) -> LatencyClasses:
    """Split per-hop latencies into a near and a far class (exact 1-D two-means on the sorted values).

    Samples above 4x the median are dropped first (TLB misses, interrupts).  The split counts as
    real when each class holds at least ``min_share`` of the samples and the class medians differ
    by more than ``min_gap`` of the near one and by more than three pooled MADs; otherwise
    near = far = the median.
    """
    array = np.sort(np.asarray(values, dtype=np.float64).reshape(-1))
    array = array[np.isfinite(array)]
    if array.size == 0:
        raise ValueError("no latency samples")
    array = array[array <= 4 * np.median(array)]
    n = array.size
    median = float(np.median(array))
    if n < 4:
        return LatencyClasses(median, median, 0.0, False, math.inf)
    prefix = np.cumsum(array)
    prefix2 = np.cumsum(array**2)
    total, total2 = prefix[-1], prefix2[-1]
    left_n = np.arange(1, n, dtype=np.float64)
    right_n = n - left_n
    left_sum, left_sq = prefix[:-1], prefix2[:-1]
    cost = (left_sq - left_sum**2 / left_n) + ((total2 - left_sq) - (total - left_sum) ** 2 / right_n)
    best_i = int(np.argmin(cost)) + 1
    low, high = array[:best_i], array[best_i:]
    near, far = float(np.median(low)), float(np.median(high))
    share = high.size / n
    mad = float(np.median(np.abs(low - near)) + np.median(np.abs(high - far))) / 2 * 1.4826
    real = (
        min(low.size, high.size) >= min_share * n and far - near > min_gap * near and far - near > 3 * max(mad, 1e-12)
    )
    if not real:
        return LatencyClasses(median, median, 0.0, False, math.inf)
    return LatencyClasses(near, far, share, True, float(0.5 * (array[best_i - 1] + array[best_i])))


def rate_from_clock(cycles: float, nanoseconds: float) -> float:
    """Clock frequency (Hz) from a %clock64 delta and a %globaltimer delta (ns)."""
    if nanoseconds <= 0:
        raise ValueError("globaltimer delta must be positive")
    return cycles / nanoseconds * 1e9


def settled_value(times: Sequence[float], values: Sequence[float], tail_fraction: float = 0.3) -> tuple[float, float]:
    """(settled level, ramp time) of a clock-vs-time trace.

    The settled level is the median of the last ``tail_fraction`` of the trace; the ramp time is
    the first time after which every value stays within 2% of that level.
    """
    ts = np.asarray(times, dtype=np.float64)
    vs = np.asarray(values, dtype=np.float64)
    if ts.size == 0:
        raise ValueError("empty trace")
    count = max(1, int(math.ceil(tail_fraction * ts.size)))
    level = float(np.median(vs[-count:]))
    outside = np.abs(vs - level) > 0.02 * level
    if not outside.any():
        return level, float(ts[0] - ts[0])
    last_out = int(np.nonzero(outside)[0][-1])
    ramp_index = min(last_out + 1, ts.size - 1)
    return level, float(ts[ramp_index] - ts[0])
