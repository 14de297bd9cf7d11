"""Bring-up check: a new card's profile against a reference profile of the same SKU, metric by metric.

A metric passes when ``|new / ref - 1| <= rel`` (or ``|new - ref| <= abs``).  Defaults follow the
metric's nature: counts the driver reports are exact, capacities +-5%, bandwidths and throughputs
+-10%, latencies +-15%, launch costs (host-dependent) +-50%; a relative tolerance is widened to twice
the larger coefficient of variation of the two measurements when they are noisier than that.
Some metrics define the SKU (memory capacity and bandwidth, L2 size, SM count): they are checked as
strictly as the rest, and when the two profiles name different devices the page says so, because
those metrics are *expected* to fail then.  Shown but not judged ("info"): model parameters fitted
to validation results, the clock ramp (idle state), and launch costs (host-dependent) unless a
tolerance file names them.

Tolerance file (TOML or JSON) overrides the defaults::

    [units]                 # by unit, for every metric of that unit
    "B/s" = 0.08
    [metrics]               # by name: a relative tolerance, or a table
    hbm_read_bandwidth = 0.05
    launch_overhead = { rel = 0.5 }
    l2_latency_far = { abs = 40 }
    clock_ramp_s = { skip = true }
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from theodolite.errors import TheodoliteError
from theodolite.profile.schema import METRICS, Profile
from theodolite.units import format_quantity


class ToleranceError(TheodoliteError):
    """A tolerance file that cannot be read or names an unknown metric."""


@dataclass(frozen=True)
class Tolerance:
    rel: float | None = 0.10
    abs: float | None = None
    skip: bool = False

    def describe(self, unit: str) -> str:
        if self.skip:
            return "skipped"
        parts = []
        if self.rel is not None:
            parts.append("exact" if self.rel == 0 else f"+-{self.rel:.0%}")
        if self.abs is not None:
            parts.append(f"+-{format_quantity(self.abs, unit, 3)}")
        return " or ".join(parts) or "any"


# Driver-reported counts: a different value means a different (or misconfigured) part.
EXACT = frozenset(
    {
        "sm_count",
        "warp_size",
        "max_threads_per_block",
        "regs_per_sm",
        "regs_per_thread_max",
        "l2_partitions",
        "smem_bytes_per_block",
        "smem_bytes_per_sm",
    }
)
# What tells one SKU from another: expected to differ when the devices differ.
SKU_IDENTITY = frozenset(
    {
        "memory_bytes",
        "hbm_read_bandwidth",
        "hbm_write_bandwidth",
        "hbm_copy_bandwidth",
        "hbm_saturation_sms",
        "l2_bytes",
        "l2_effective_bytes",
        "mall_bytes",
        "sm_count",
        "clock_max_hz",
        "hbm_latency",
        # L2 bandwidth scales with the L2 slices a SKU enables (H100 SXM: 50 of the die's 60 MB)
        "l2_bandwidth",
    }
)
# Properties of the host (CPU, driver, OS) as much as of the card (host names do not tell machines
# apart: ours are all "vm"): informational unless a tolerance file names them.
HOST_DEPENDENT = frozenset({"launch_overhead", "launch_roundtrip"})
# Never pass/fail: the clock ramp depends on how idle the card was before calibration.
INFORMATIONAL = frozenset({"clock_ramp_s"})
UNIT_DEFAULTS: dict[str, Tolerance] = {
    "1": Tolerance(rel=0.0),
    "B": Tolerance(rel=0.05),
    "Hz": Tolerance(rel=0.05),
    "FLOP/s": Tolerance(rel=0.10),
    "B/s": Tolerance(rel=0.10),
    "B/cycle": Tolerance(rel=0.10),
    "FLOP/cycle": Tolerance(rel=0.10),
    "cycle": Tolerance(rel=0.15),
    "s": Tolerance(rel=0.25),
}
METRIC_DEFAULTS: dict[str, Tolerance] = {
    "hbm_saturation_sms": Tolerance(rel=0.20),  # a measured count, not a driver one
    "l2_effective_bytes": Tolerance(rel=0.10),  # a detected knee, not a driver figure
    "clock_ramp_s": Tolerance(rel=0.50),  # depends on idle state and thermals
    # launch costs depend on the host (CPU, driver, OS) as much as on the card
    "launch_overhead": Tolerance(rel=0.50),
    "launch_roundtrip": Tolerance(rel=0.50),
    "launch_overhead_graph": Tolerance(rel=0.50),  # the GPU's own launch gap, but driver-dependent
    "program_start_cost": Tolerance(rel=0.50),
}
NOISE_FACTOR = 2.0  # a metric whose samples scatter by CV c is not checked tighter than +-2c


def default_tolerance(name: str) -> Tolerance:
    if name in METRIC_DEFAULTS:
        return METRIC_DEFAULTS[name]
    if name in EXACT:
        return Tolerance(rel=0.0)
    unit = METRICS[name].unit if name in METRICS else "1"
    return UNIT_DEFAULTS.get(unit, Tolerance())


def _tolerance_from(value: Any, where: str) -> Tolerance:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value < 0:
            raise ToleranceError(f"{where}: tolerance must be >= 0, got {value}")
        return Tolerance(rel=float(value))
    if isinstance(value, Mapping):
        unknown = set(value) - {"rel", "abs", "skip"}
        if unknown:
            raise ToleranceError(f"{where}: unknown key(s) {sorted(unknown)} (expected rel, abs, skip)")
        rel = value.get("rel")
        absolute = value.get("abs")
        for number in (rel, absolute):
            if number is not None and (not isinstance(number, (int, float)) or number < 0):
                raise ToleranceError(f"{where}: rel/abs must be non-negative numbers, got {number!r}")
        return Tolerance(
            rel=None if rel is None and absolute is not None else float(rel if rel is not None else 0.10),
            abs=None if absolute is None else float(absolute),
            skip=bool(value.get("skip", False)),
        )
    raise ToleranceError(f"{where}: expected a number or a table with rel/abs/skip, got {value!r}")


@dataclass(frozen=True)
class Tolerances:
    units: Mapping[str, Tolerance]
    metrics: Mapping[str, Tolerance]

    def for_metric(self, name: str) -> Tolerance:
        if name in self.metrics:
            return self.metrics[name]
        unit = METRICS[name].unit if name in METRICS else "1"
        if unit in self.units and name not in METRIC_DEFAULTS and name not in EXACT:
            return self.units[unit]
        return default_tolerance(name)


def load_tolerances(path: str | os.PathLike[str] | None) -> Tolerances:
    """Defaults, overridden by a TOML or JSON file (see the module docstring)."""
    if path is None:
        return Tolerances({}, {})
    source = Path(path)
    try:
        text = source.read_text()
    except OSError as error:
        raise ToleranceError(f"{source}: cannot read tolerance file ({error})") from None
    try:
        if source.suffix.lower() == ".json":
            data = json.loads(text)
        else:
            try:
                import tomllib
            except ImportError:  # Python 3.10
                import tomli as tomllib  # type: ignore[no-redef]
            data = tomllib.loads(text)
    except Exception as error:
        raise ToleranceError(f"{source}: not valid {source.suffix.lstrip('.') or 'TOML'} ({error})") from None
    if not isinstance(data, dict):
        raise ToleranceError(f"{source}: expected tables 'units' and/or 'metrics'")
    unknown = set(data) - {"units", "metrics"}
    if unknown:
        raise ToleranceError(f"{source}: unknown section(s) {sorted(unknown)} (expected 'units', 'metrics')")
    metrics = {}
    for name, value in dict(data.get("metrics", {})).items():
        if name not in METRICS:
            raise ToleranceError(f"{source}: unknown metric {name!r} in [metrics]")
        metrics[name] = _tolerance_from(value, f"{source}: metrics.{name}")
    units = {}
    for unit, value in dict(data.get("units", {})).items():
        units[unit] = _tolerance_from(value, f"{source}: units.{unit}")
    return Tolerances(units, metrics)


@dataclass(frozen=True)
class CheckRow:
    metric: str
    unit: str
    new: float | None
    ref: float | None
    tolerance: str
    status: str  # "pass", "FAIL", "missing", "skip", "extra", "info"
    note: str = ""

    @property
    def ratio(self) -> float | None:
        if self.new is None or not self.ref:
            return None
        return self.new / self.ref

    @property
    def failed(self) -> bool:
        return self.status in ("FAIL", "missing")


def _within(new: float, ref: float, tolerance: Tolerance) -> bool:
    if tolerance.abs is not None and abs(new - ref) <= tolerance.abs:
        return True
    if tolerance.rel is not None:
        if ref == 0:
            return new == 0
        return abs(new / ref - 1.0) <= tolerance.rel + 1e-12
    return False


def _widened(tolerance: Tolerance, new: Profile, ref: Profile, name: str, notes: list[str]) -> Tolerance:
    """Loosen a relative tolerance to NOISE_FACTOR x the larger CV of the two measurements (never exact ones)."""
    if not tolerance.rel:
        return tolerance
    cvs = [p.metrics[name].cv for p in (new, ref) if name in p.metrics and math.isfinite(p.metrics[name].cv)]
    noise = NOISE_FACTOR * max(cvs, default=0.0)
    if noise <= tolerance.rel:
        return tolerance
    notes.append(f"tolerance widened from +-{tolerance.rel:.0%} by measurement noise (CV {max(cvs):.1%})")
    return Tolerance(rel=noise, abs=tolerance.abs, skip=tolerance.skip)


def same_sku(new: Profile, ref: Profile) -> bool:
    return new.device_name.strip().lower() == ref.device_name.strip().lower()


def _informational(name: str, new: Profile, ref: Profile) -> str | None:
    """Why a metric is shown but not judged (None: it is judged)."""
    if name.startswith("model_"):
        return "model parameter fitted to validation results, not a hardware measurement"
    if name in INFORMATIONAL:
        return "depends on how idle the card was before calibration"
    if name in HOST_DEPENDENT:
        return "measures the host (CPU, driver, OS) as much as the card; name it in a tolerance file to judge it"
    return None


def expected_failure(row: CheckRow) -> bool:
    """A failed SKU-defining metric of two different devices: what a cross-SKU comparison should show."""
    return row.failed and "SKU-defining" in row.note


def check_profiles(new: Profile, ref: Profile, tolerances: Tolerances | None = None) -> list[CheckRow]:
    """One row per metric of either profile, in schema order; ``failed`` rows make the check fail."""
    tolerances = tolerances or Tolerances({}, {})
    sku = same_sku(new, ref)
    rows = []
    names = [n for n in METRICS if n in new.metrics or n in ref.metrics]
    for name in names:
        unit = METRICS[name].unit
        tolerance = tolerances.for_metric(name)
        value_new, value_ref = new.get(name), ref.get(name)
        notes = []
        if not sku and name in SKU_IDENTITY:
            notes.append("SKU-defining metric: expected to differ between different devices")
        for label, profile in (("new", new), ("ref", ref)):
            if name in profile.metrics and profile.metrics[name].flagged:
                notes.append(f"{label} value is noisy (CV {profile.metrics[name].cv:.1%})")
        info = _informational(name, new, ref) if name not in tolerances.metrics else None
        if tolerance.skip:
            status = "skip"
        elif info is not None:
            status = "info"
            notes.append(info)
        elif value_ref is None:
            status = "extra"
            notes.append("not in the reference")
        elif value_new is None:
            status = "missing"
            reason = new.unsupported.get(name)
            notes.append(f"not measured on the new card{': ' + reason if reason else ''}")
        else:
            tolerance = _widened(tolerance, new, ref, name, notes)
            status = "pass" if _within(value_new, value_ref, tolerance) else "FAIL"
        rows.append(CheckRow(name, unit, value_new, value_ref, tolerance.describe(unit), status, "; ".join(notes)))
    return rows


def verdict(rows: list[CheckRow]) -> bool:
    """True when nothing failed."""
    return not any(row.failed for row in rows)


def _fmt(value: float | None, unit: str) -> str:
    return "-" if value is None or not math.isfinite(value) else format_quantity(value, unit)


def row_cells(row: CheckRow) -> list[str]:
    ratio = row.ratio
    return [
        row.metric,
        _fmt(row.new, row.unit),
        _fmt(row.ref, row.unit),
        "-" if ratio is None else f"{ratio:.3f}",
        row.tolerance,
        row.status,
        row.note,
    ]


HEADERS = ["metric", "new", "reference", "new/ref", "tolerance", "status", "note"]


def terminal_table(rows: list[CheckRow], new: Profile, ref: Profile) -> Any:
    from rich.table import Table

    failed = sum(row.failed for row in rows)
    title = f"check {new.device_name} ({new.origin}) against {ref.device_name} ({ref.origin})"
    caption = f"{len(rows)} metrics, {failed} failed{_split(rows)}: " + ("FAIL" if failed else "PASS")
    table = Table(title=title, caption=caption)
    for column in HEADERS:
        table.add_column(column, overflow="fold")
    styles = {"FAIL": "red", "missing": "red", "pass": "green", "skip": "dim", "extra": "yellow", "info": "dim"}
    for row in rows:
        cells = row_cells(row)
        style = styles.get(row.status, "")
        cells[5] = f"[{style}]{row.status}[/{style}]" if style else row.status
        table.add_row(*cells)
    return table


def _split(rows: list[CheckRow]) -> str:
    """' (N SKU-defining, as expected for different devices; M unexpected)' when any failure is expected."""
    expected = sum(expected_failure(row) for row in rows)
    if not expected:
        return ""
    unexpected = sum(row.failed for row in rows) - expected
    return f" ({expected} SKU-defining, as expected for different devices; {unexpected} unexpected)"


def render_check_html(rows: list[CheckRow], new: Profile, ref: Profile, tolerance_file: str | None = None) -> str:
    from theodolite.reports import html

    failed = [row for row in rows if row.failed]
    badge = '<span class="badge bad">FAIL</span>' if failed else '<span class="badge good">PASS</span>'
    body = [
        f"<p>{badge} {len(rows)} metrics checked, {len(failed)} failed{html.esc(_split(rows))}. "
        f"New card: <b>{html.esc(new.device_name)}</b> "
        f"({html.esc(new.origin)}, fingerprint {html.esc(new.fingerprint)}); reference: "
        f"<b>{html.esc(ref.device_name)}</b> ({html.esc(ref.origin)}, fingerprint {html.esc(ref.fingerprint)}).</p>",
        "<p class='small'>A metric passes when the new value is within its tolerance of the reference "
        f"({'tolerances from ' + html.esc(tolerance_file) if tolerance_file else 'default tolerances'}: counts exact, "
        "capacities and clocks +-5%, bandwidths and throughputs +-10%, latencies +-15%, launch costs +-50%; "
        "noisy measurements widen it to twice their CV).</p>",
    ]
    if not same_sku(new, ref):
        body.append(
            "<p class='missing'>The two profiles name different devices. Memory capacity and bandwidth (and the other "
            "SKU-defining metrics, highlighted) are expected to differ; a bring-up check compares cards of the same "
            "SKU.</p>"
        )
    if failed:
        body.append("<h2>Failures</h2>")
        body.append(
            html.table(
                HEADERS,
                [row_cells(r) for r in failed],
                (1, 2, 3),
                cell_classes={5: "status"},
                row_classes=["fail"] * len(failed),
            )
        )
    body.append("<h2>Every metric</h2>")
    classes = ["fail" if r.failed else ("expected" if "SKU-defining" in r.note else "pass") for r in rows]
    body.append(html.table(HEADERS, [row_cells(r) for r in rows], (1, 2, 3), classes, cell_classes={5: "status"}))
    return html.page(f"Bring-up check: {new.device_name}", body, f"against {ref.device_name}")
