"""Matplotlib figures of a profile (Agg backend, no display): each returns a Figure, or None when not measured.

Curve names are chosen by the probes; they are read generically here, by units and by name
substrings ("l2", "hbm", "working_set", "program", "wave", "latency"), so a renamed curve still lands
in the right plot and an unknown one lands in "other sweeps".
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from theodolite.profile.schema import Curve, Profile  # noqa: E402

LATENCY_LADDER = (
    ("smem_latency", "shared memory"),
    ("l2_latency_near", "L2 near"),
    ("l2_latency_far", "L2 far"),
    ("hbm_latency", "HBM"),
)
MMA_CEILINGS = (
    ("mma_throughput_fp8e4m3", "fp8 e4m3"),
    ("mma_throughput_fp8e5m2", "fp8 e5m2"),
    ("mma_throughput_fp16", "fp16"),
    ("mma_throughput_bf16", "bf16"),
    ("mma_throughput_tf32", "tf32"),
    ("fma_throughput_fp32", "fp32 FMA"),
)
MEMORY_CEILINGS = (("l2_bandwidth", "L2"), ("hbm_read_bandwidth", "HBM read"))

_BYTES_TICKS = ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB"), (1, "B"))


def _text(curve: Curve) -> str:
    return " ".join((curve.name, curve.x_label, curve.y_label, curve.method)).lower()


def is_bandwidth_curve(curve: Curve) -> bool:
    """Bandwidth against working-set size (bytes on x, bytes per second on y)."""
    return curve.x_unit == "B" and curve.y_unit == "B/s"


def is_latency_curve(curve: Curve) -> bool:
    """Dependent-load latency against footprint (pointer chase): bytes on x, cycles or seconds on y."""
    return curve.x_unit == "B" and curve.y_unit in ("cycle", "s")


def is_bandwidth_sms_curve(curve: Curve) -> bool:
    """Bandwidth against the number of SMs (or programs) streaming: where memory saturates."""
    return curve.x_unit == "1" and curve.y_unit == "B/s"


def is_programs_curve(curve: Curve) -> bool:
    """Throughput or time against the number of programs launched (the wave staircase)."""
    text = _text(curve)
    keyword = any(word in text for word in ("program", "wave", "block", "cta", "grid", "sm_count", "occupancy"))
    return curve.x_unit == "1" and curve.y_unit in ("FLOP/s", "s", "FLOP/cycle") and keyword


def classify(profile: Profile) -> dict[str, list[Curve]]:
    """Curves grouped by the plot that shows them: bandwidth, latency, programs, bandwidth_sms, other."""
    groups: dict[str, list[Curve]] = {"bandwidth": [], "latency": [], "programs": [], "bandwidth_sms": [], "other": []}
    for curve in profile.curves.values():
        if curve.x.size == 0:
            continue
        if is_bandwidth_curve(curve):
            groups["bandwidth"].append(curve)
        elif is_bandwidth_sms_curve(curve):
            groups["bandwidth_sms"].append(curve)
        elif is_latency_curve(curve):
            groups["latency"].append(curve)
        elif is_programs_curve(curve):
            groups["programs"].append(curve)
        else:
            groups["other"].append(curve)
    return groups


def _bytes_label(value: float) -> str:
    for scale, name in _BYTES_TICKS:
        if value >= scale:
            return f"{value / scale:g} {name}"
    return f"{value:g} B"


def _bytes_axis(axis: Any, values: Iterable[float]) -> None:
    values = [v for v in values if v > 0]
    if not values:
        return
    low, high = min(values), max(values)
    ticks = [2.0**e for e in range(int(math.floor(math.log2(low))), int(math.ceil(math.log2(high))) + 1)]
    if len(ticks) > 12:
        step = math.ceil(len(ticks) / 10)
        ticks = ticks[::step]
    axis.set_xticks(ticks)
    axis.set_xticklabels([_bytes_label(t) for t in ticks], rotation=45, ha="right")
    axis.minorticks_off()


def knee_of(curve: Curve) -> float | None:
    """A knee the probe stored on the curve (any attribute whose name mentions 'knee'), if one."""
    for key, value in curve.attrs.items():
        if "knee" in key.lower():
            try:
                number = float(value)
            except (TypeError, ValueError):
                continue
            if math.isfinite(number) and number > 0:
                return number
    return None


def _fill(axis: Any, curve: Curve, scale: float, color: Any) -> None:
    if curve.y_low is not None and curve.y_high is not None and curve.y_low.shape == curve.x.shape:
        axis.fill_between(curve.x, curve.y_low / scale, curve.y_high / scale, color=color, alpha=0.2, linewidth=0)


def bandwidth_vs_working_set(profile: Profile) -> Any | None:
    """Read bandwidth against working-set size with the cache-capacity knee and L2 size marked."""
    curves = classify(profile)["bandwidth"]
    if not curves:
        return None
    figure, axis = plt.subplots(figsize=(8, 4.5))
    xs: list[float] = []
    knees: list[tuple[float, str]] = []
    for curve in curves:
        (line,) = axis.plot(curve.x, curve.y / 1e12, marker="o", markersize=3, label=curve.name)
        _fill(axis, curve, 1e12, line.get_color())
        xs.extend(curve.x.tolist())
        knee = knee_of(curve)
        if knee is not None:
            knees.append((knee, f"knee ({curve.name}): {_bytes_label(knee)}"))
    if not knees and profile.get("l2_effective_bytes"):
        knee = float(profile.value("l2_effective_bytes"))
        knees.append((knee, f"l2_effective_bytes: {_bytes_label(knee)}"))
    for knee, label in knees:
        axis.axvline(knee, color="crimson", linestyle="--", linewidth=1.2, label=label)
    if profile.get("l2_bytes"):
        size = float(profile.value("l2_bytes"))
        axis.axvline(size, color="gray", linestyle=":", linewidth=1.2, label=f"L2 size (driver): {_bytes_label(size)}")
    axis.set_xscale("log", base=2)
    _bytes_axis(axis, xs + [k for k, _ in knees])
    axis.set_xlabel("working-set size")
    axis.set_ylabel("bandwidth (TB/s)")
    axis.set_title("Bandwidth vs working-set size")
    axis.grid(True, which="major", alpha=0.3)
    axis.legend(fontsize=8)
    return figure


def latency_ladder(profile: Profile) -> Any | None:
    """Load-to-use latency per level (bars, cycles), plus any pointer-chase curve against footprint."""
    levels = [(label, profile.get(name)) for name, label in LATENCY_LADDER]
    present = [(label, value) for label, value in levels if value]
    curves = classify(profile)["latency"]
    if not present and not curves:
        return None
    panels = (1 if present else 0) + (1 if curves else 0)
    figure, axes = plt.subplots(1, panels, figsize=(5.5 * panels, 4.2), squeeze=False)
    index = 0
    if present:
        axis = axes[0][index]
        index += 1
        labels = [label for label, _ in levels]
        values = [value or 0.0 for _, value in levels]
        bars = axis.bar(labels, values, color=["#4c72b0", "#55a868", "#8fbc8f", "#c44e52"])
        for bar, (_, value) in zip(bars, levels, strict=True):
            text = f"{value:.0f}" if value else "not measured"
            axis.annotate(text, (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center", va="bottom")
        axis.set_ylabel("latency (cycles)")
        axis.set_title("Latency ladder")
        axis.grid(True, axis="y", alpha=0.3)
    if curves:
        axis = axes[0][index]
        xs: list[float] = []
        for curve in curves:
            axis.plot(curve.x, curve.y, marker="o", markersize=3, label=f"{curve.name} ({curve.y_unit})")
            xs.extend(curve.x.tolist())
        axis.set_xscale("log", base=2)
        _bytes_axis(axis, xs)
        axis.set_xlabel("footprint")
        axis.set_ylabel("latency")
        axis.set_title("Pointer-chase latency vs footprint")
        axis.grid(True, alpha=0.3)
        axis.legend(fontsize=8)
    figure.tight_layout()
    return figure


def wave_staircase(profile: Profile) -> Any | None:
    """Throughput (or time) against programs launched, with multiples of the SM count marked."""
    curves = classify(profile)["programs"]
    if not curves:
        return None
    figure, axis = plt.subplots(figsize=(8, 4.2))
    top = 0.0
    for curve in curves:
        scale, unit = (1e12, "T" + curve.y_unit) if curve.y_unit in ("FLOP/s", "B/s") else (1.0, curve.y_unit)
        if curve.y_unit == "s":
            scale, unit = 1e-6, "us"
        axis.plot(curve.x, curve.y / scale, marker=".", markersize=3, label=f"{curve.name} ({unit})")
        top = max(top, float(np.max(curve.x)))
    widths = [float(c.attrs["wave_width"]) for c in curves if _number(c.attrs.get("wave_width"))]
    sms = widths[0] if widths else profile.get("sm_count")
    if sms:
        waves = range(1, int(top // sms) + 1) if top >= sms else ()
        for wave in waves:
            axis.axvline(wave * sms, color="gray", linestyle=":", linewidth=1)
        axis.axvline(
            sms,
            color="crimson",
            linestyle=":",
            linewidth=1.2,
            label=f"{'fitted wave width' if widths else 'SM count'} = {sms:.0f} (one wave)",
        )
    axis.set_xlabel("programs launched")
    axis.set_ylabel(", ".join(sorted({c.y_label or c.y_unit for c in curves})))
    axis.set_title("Throughput vs number of programs (wave staircase)")
    axis.grid(True, alpha=0.3)
    axis.legend(fontsize=8)
    return figure


def _present(profile: Profile, names: tuple[tuple[str, str], ...]) -> list[tuple[str, float]]:
    """(label, value) of the named metrics the profile has."""
    out = []
    for name, label in names:
        value = profile.get(name)
        if value:
            out.append((label, float(value)))
    return out


def _number(value: Any) -> bool:
    try:
        return math.isfinite(float(value)) and float(value) > 0
    except (TypeError, ValueError):
        return False


def bandwidth_vs_sms(profile: Profile) -> Any | None:
    """Bandwidth against SMs streaming (HBM and L2): how many SMs it takes to saturate each level."""
    curves = classify(profile)["bandwidth_sms"]
    if not curves:
        return None
    figure, axis = plt.subplots(figsize=(8, 4.2))
    for curve in curves:
        (line,) = axis.plot(curve.x, curve.y / 1e12, marker="o", markersize=3, label=curve.name)
        _fill(axis, curve, 1e12, line.get_color())
    saturation = profile.get("hbm_saturation_sms")
    if saturation:
        axis.axvline(
            saturation,
            color="crimson",
            linestyle="--",
            linewidth=1.2,
            label=f"hbm_saturation_sms = {saturation:.0f} (90% of the best)",
        )
    axis.set_xlabel("SMs streaming (one program each)")
    axis.set_ylabel("bandwidth (TB/s)")
    axis.set_title("Bandwidth vs SMs")
    axis.grid(True, alpha=0.3)
    axis.legend(fontsize=8)
    return figure


def roofline(profile: Profile) -> Any | None:
    """Roofline with the profile's ceilings: one flat roof per dtype, one slanted roof per memory level."""
    roofs = _present(profile, MMA_CEILINGS)
    slopes = _present(profile, MEMORY_CEILINGS)
    if not roofs or not slopes:
        return None
    intensity = np.geomspace(0.25, 16384, 400)
    figure, axis = plt.subplots(figsize=(8, 5))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for index, (label, bandwidth) in enumerate(slopes):
        peak = max(value for _, value in roofs)
        curve = np.minimum(intensity * bandwidth, peak)
        axis.plot(intensity, curve / 1e12, linestyle="--", color=colors[index % len(colors)], linewidth=1)
        axis.annotate(
            f"{label} {bandwidth / 1e12:.2f} TB/s",
            (intensity[8], intensity[8] * bandwidth / 1e12),
            fontsize=8,
            rotation=0,
            color=colors[index % len(colors)],
        )
    hbm = dict(slopes).get("HBM read", slopes[-1][1])
    for index, (label, peak) in enumerate(roofs):
        color = colors[(index + len(slopes)) % len(colors)]
        axis.plot(intensity, np.minimum(intensity * hbm, peak) / 1e12, color=color, linewidth=1.6)
        ridge = peak / hbm
        axis.annotate(
            f"{label} {peak / 1e12:.0f} TFLOP/s (ridge {ridge:.0f} FLOP/B)",
            (intensity[-1], peak / 1e12),
            ha="right",
            va="bottom",
            fontsize=8,
            color=color,
        )
    axis.set_xscale("log", base=2)
    axis.set_yscale("log")
    axis.set_xlabel("arithmetic intensity (FLOP/byte)")
    axis.set_ylabel("attainable TFLOP/s")
    axis.set_title("Roofline (ceilings from the profile)")
    axis.grid(True, which="major", alpha=0.3)
    return figure


def other_curves(profile: Profile) -> list[tuple[str, Any]]:
    """One small figure per curve that no other plot claims, so nothing a probe stored is hidden."""
    figures = []
    for curve in classify(profile)["other"]:
        figure, axis = plt.subplots(figsize=(6.5, 3.6))
        axis.plot(curve.x, curve.y, marker=".", markersize=3)
        _fill(axis, curve, 1.0, "C0")
        if curve.x.size and np.all(curve.x > 0) and curve.x.max() / max(curve.x.min(), 1e-300) > 100:
            axis.set_xscale("log")
        axis.set_xlabel(f"{curve.x_label or 'x'} ({curve.x_unit})")
        axis.set_ylabel(f"{curve.y_label or 'y'} ({curve.y_unit})")
        axis.set_title(curve.name)
        axis.grid(True, alpha=0.3)
        figures.append((curve.name, figure))
    return figures
