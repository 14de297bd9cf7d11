"""Calibration that guards itself: a probe whose spread is over its limit is measured again.

A probe's metrics each carry a coefficient of variation (CV).  When any metric with a limit in
``runner.SPREAD_LIMITS`` comes back over it, the whole probe runs again, up to ``MAX_ATTEMPTS``
times in all, and the attempt with the lowest *worst* spread (max over its limited metrics of
CV / limit) is kept.  Why the quietest attempt and not a median of attempts: interference (another
process compiling on the host, another GPU's probe) only ever slows samples down and widens their
spread, so the quietest attempt is the one closest to the undisturbed card; a median of three
attempts of which two were disturbed would still be disturbed.  Why the whole probe and not single
metrics: a probe's metrics come from the same sweep (``hbm_saturation_sms`` and
``hbm_read_bandwidth_one_sm`` are read off one curve), so an attempt is kept or dropped as one.

What happened is recorded on every metric of a re-measured probe (``Measurement.attempts``: the
limit, each attempt's CV and value, the attempt kept) and in one line of provenance notes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from theodolite.probes.common import ProbeResult

MAX_ATTEMPTS = 3


@dataclass
class GuardRecord:
    """What the guard did for one probe: spreads over limit per attempt and the attempt kept."""

    probe: str
    limits: Mapping[str, float]
    cvs: list[dict[str, float]] = field(default_factory=list)  # per attempt: metric -> CV
    values: list[dict[str, float]] = field(default_factory=list)  # per attempt: metric -> value
    errors: list[str] = field(default_factory=list)  # per attempt: "" or why it raised
    kept: int = 0  # 0-based index of the attempt kept

    @property
    def remeasured(self) -> bool:
        return len(self.cvs) > 1

    def over(self, attempt: int) -> dict[str, float]:
        """Limited metrics whose CV was over its limit in ``attempt``."""
        return {
            name: cv
            for name, cv in self.cvs[attempt].items()
            if name in self.limits and math.isfinite(cv) and cv > self.limits[name]
        }

    def note(self) -> str:
        """One line for the provenance notes."""
        first = self.over(0)
        names = sorted(first)
        parts = []
        for name in names:
            spreads = ", ".join(
                "failed" if self.errors[i] else f"{100 * self.cvs[i].get(name, math.nan):.1f}%"
                for i in range(len(self.cvs))
            )
            parts.append(f"{name} CV {spreads} (limit {100 * self.limits[name]:.0f}%)")
        still = self.over(self.kept)
        tail = f"; still over its limit: {', '.join(sorted(still))}" if still else ""
        return f"{self.probe} re-measured: {len(self.cvs)} attempts, kept {self.kept + 1} ({'; '.join(parts)}){tail}"


def spreads(result: ProbeResult) -> dict[str, float]:
    return {name: float(m.cv) for name, m in result.metrics.items()}


def score(result: ProbeResult, limits: Mapping[str, float]) -> float:
    """Worst CV / limit over the limited metrics the probe wrote (<= 1: within every limit)."""
    worst = 0.0
    for name, limit in limits.items():
        measurement = result.metrics.get(name)
        if measurement is None or not math.isfinite(measurement.cv):
            continue
        worst = max(worst, measurement.cv / limit if limit > 0 else (math.inf if measurement.cv > 0 else 0.0))
    return worst


def guarded(
    probe: str,
    run_once: Callable[[], ProbeResult],
    limits: Mapping[str, float],
    *,
    attempts: int = MAX_ATTEMPTS,
    log: Callable[[str], None] = print,
) -> tuple[ProbeResult, GuardRecord | None]:
    """Run ``run_once`` until its limited spreads are within ``limits`` (at most ``attempts`` runs).

    The first run's exception propagates (the caller records the probe as unsupported); a re-run that
    raises counts as a failed attempt and the best earlier one is kept.  Returns the kept result (its
    metrics annotated when re-measured) and the record, or None when the first run was within limits.
    """
    if attempts < 1:
        raise ValueError(f"attempts must be >= 1, got {attempts}")
    first = run_once()
    if not limits or score(first, limits) <= 1.0:
        return first, None
    record = GuardRecord(probe, dict(limits), [spreads(first)], [_values(first)], [""])
    results: list[ProbeResult | None] = [first]
    best_score = score(first, limits)
    while len(results) < attempts:
        log(f"{probe}: spread over its limit ({_describe(record.over(len(results) - 1))}); measuring again")
        try:
            current: ProbeResult | None = run_once()
        except KeyboardInterrupt:
            raise
        except Exception as error:
            current = None
            record.errors.append(f"{type(error).__name__}: {str(error)[:200]}")
            record.cvs.append({})
            record.values.append({})
        else:
            assert current is not None
            record.errors.append("")
            record.cvs.append(spreads(current))
            record.values.append(_values(current))
        results.append(current)
        if current is None:
            continue
        current_score = score(current, limits)
        if current_score < best_score:
            best_score, record.kept = current_score, len(results) - 1
        if current_score <= 1.0:
            break
    kept = results[record.kept]
    assert kept is not None
    return annotate(kept, record), record


def annotate(result: ProbeResult, record: GuardRecord) -> ProbeResult:
    """The kept result with each metric's ``attempts`` filled in."""
    metrics = {}
    for name, measurement in result.metrics.items():
        info: dict[str, Any] = {
            "kept": record.kept + 1,
            "cv": [cvs.get(name, math.nan) for cvs in record.cvs],
            "value": [values.get(name, math.nan) for values in record.values],
        }
        if name in record.limits:
            info["limit"] = record.limits[name]
        metrics[name] = replace(measurement, attempts=info)
    return ProbeResult(
        metrics=metrics,
        curves=dict(result.curves),
        unsupported=dict(result.unsupported),
        references=dict(result.references),
        diagnostics={**result.diagnostics, f"{record.probe}_attempts": len(record.cvs)},
    )


def _values(result: ProbeResult) -> dict[str, float]:
    return {name: float(m.value) for name, m in result.metrics.items()}


def _describe(over: Mapping[str, float]) -> str:
    return ", ".join(f"{name} CV {100 * cv:.1f}%" for name, cv in sorted(over.items()))
