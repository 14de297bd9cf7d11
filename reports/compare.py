"""Side-by-side of two profiles (e.g. H100 vs H200): values, ratios, and their sweeps overlaid."""

from __future__ import annotations

from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from theodolite.reports import html, plots  # noqa: E402

from theodolite.profile.schema import METRICS, Profile  # noqa: E402
from theodolite.units import format_quantity  # noqa: E402

HEADERS = ["metric", "new", "reference", "new/ref", "meaning"]


def compare_rows(new: Profile, ref: Profile) -> list[list[str]]:
    rows = []
    for name in METRICS:
        if name not in new.metrics and name not in ref.metrics:
            continue
        a, b = new.get(name), ref.get(name)
        unit = METRICS[name].unit
        ratio = f"{a / b:.3f}" if a is not None and b else "-"
        rows.append(
            [
                name,
                "-" if a is None else format_quantity(a, unit),
                "-" if b is None else format_quantity(b, unit),
                ratio,
                METRICS[name].description,
            ]
        )
    return rows


def terminal_table(new: Profile, ref: Profile) -> Any:
    from rich.table import Table

    table = Table(title=f"{new.device_name} ({new.origin}) vs {ref.device_name} ({ref.origin})")
    for column in HEADERS[:4]:
        table.add_column(column)
    for row in compare_rows(new, ref):
        ratio = row[3]
        try:
            off = abs(float(ratio) - 1) > 0.05
        except ValueError:
            off = False
        table.add_row(row[0], row[1], row[2], f"[bold]{ratio}[/bold]" if off else ratio)
    return table


def _label(profile: Profile, role: str) -> str:
    return f"{role}: {profile.device_name}"


def overlay_bandwidth(new: Profile, ref: Profile) -> Any | None:
    pairs = [(new, "new", "-"), (ref, "ref", "--")]
    if not any(plots.classify(p)["bandwidth"] for p, _, _ in pairs):
        return None
    figure, axis = plt.subplots(figsize=(8, 4.5))
    xs: list[float] = []
    for profile, role, style in pairs:
        for curve in plots.classify(profile)["bandwidth"]:
            axis.plot(curve.x, curve.y / 1e12, style, marker=".", label=f"{_label(profile, role)} {curve.name}")
            xs.extend(curve.x.tolist())
            knee = plots.knee_of(curve)
            if knee:
                axis.axvline(knee, linestyle=style, color="crimson", linewidth=1)
    axis.set_xscale("log", base=2)
    plots._bytes_axis(axis, xs)
    axis.set_xlabel("working-set size")
    axis.set_ylabel("bandwidth (TB/s)")
    axis.set_title("Bandwidth vs working-set size")
    axis.grid(True, alpha=0.3)
    axis.legend(fontsize=7)
    return figure


def overlay_roofline(new: Profile, ref: Profile) -> Any | None:
    """Both rooflines (every dtype both profiles have, bounded by HBM; L2 dashed): where the ridge moves."""
    pairs = [(new, "new", "-"), (ref, "ref", "--")]
    if not all(plots._present(p, plots.MMA_CEILINGS) and p.get("hbm_read_bandwidth") for p, _, _ in pairs):
        return None
    intensity = np.geomspace(0.25, 16384, 400)
    figure, axis = plt.subplots(figsize=(8, 5))
    for profile, role, style in pairs:
        hbm = float(profile.value("hbm_read_bandwidth"))
        for index, (label, peak) in enumerate(plots._present(profile, plots.MMA_CEILINGS)):
            axis.plot(
                intensity,
                np.minimum(intensity * hbm, peak) / 1e12,
                style,
                color=f"C{index}",
                linewidth=1.3,
                label=f"{role} {label}: ridge {peak / hbm:.0f} FLOP/B",
            )
    axis.set_xscale("log", base=2)
    axis.set_yscale("log")
    axis.set_xlabel("arithmetic intensity (FLOP/byte)")
    axis.set_ylabel("attainable TFLOP/s (HBM-bound)")
    axis.set_title(f"Rooflines: {new.device_name} (solid) vs {ref.device_name} (dashed)")
    axis.grid(True, alpha=0.3)
    axis.legend(fontsize=6, ncol=2)
    return figure


def ratio_bars(new: Profile, ref: Profile) -> Any | None:
    """new/ref per shared metric, as horizontal bars around 1."""
    names = [n for n in METRICS if new.get(n) and ref.get(n)]
    if not names:
        return None
    ratios = np.array([float(new.value(n)) / float(ref.value(n)) for n in names])
    figure, axis = plt.subplots(figsize=(8, 0.26 * len(names) + 1.2))
    colors = ["#c44e52" if abs(r - 1) > 0.10 else ("#dd8452" if abs(r - 1) > 0.02 else "#55a868") for r in ratios]
    axis.barh(names, ratios - 1, left=1, color=colors)
    axis.axvline(1, color="black", linewidth=0.8)
    for row, ratio in enumerate(ratios):
        if abs(ratio - 1) > 0.02:
            axis.annotate(f"{ratio:.2f}", (ratio, row), va="center", ha="left" if ratio > 1 else "right", fontsize=7)
    axis.set_xscale("log")
    low, high = float(np.min(ratios)), float(np.max(ratios))
    pad = 1.15
    axis.set_xlim(min(low, 1) / pad, max(high, 1) * pad)
    axis.invert_yaxis()
    axis.set_xlabel("new / reference")
    axis.set_title("Ratio per metric")
    axis.tick_params(axis="y", labelsize=7)
    axis.grid(True, axis="x", alpha=0.3)
    return figure


def render_compare_html(new: Profile, ref: Profile) -> str:
    body = [
        f"<p>New: <b>{html.esc(new.device_name)}</b> ({html.esc(new.provenance.source)}, {html.esc(new.origin)}); "
        f"reference: <b>{html.esc(ref.device_name)}</b> ({html.esc(ref.provenance.source)}, {html.esc(ref.origin)})."
        "</p>",
        "<h2>Ratios</h2>",
        html.plot_or_missing(
            ratio_bars(new, ref), "ratios", "new/ref per metric (red: over 10% apart)", "no shared metric"
        ),
        "<h2>Bandwidth vs working-set size</h2>",
        html.plot_or_missing(
            overlay_bandwidth(new, ref),
            "bandwidth overlay",
            "solid: new, dashed: reference",
            "neither profile has a bandwidth sweep",
        ),
        "<h2>Rooflines</h2>",
        html.plot_or_missing(
            overlay_roofline(new, ref),
            "roofline overlay",
            "solid: new, dashed: reference",
            "a profile lacks throughput or HBM bandwidth",
        ),
        "<h2>Values</h2>",
    ]
    rows = compare_rows(new, ref)
    classes = []
    for row in rows:
        try:
            classes.append("expected" if abs(float(row[3]) - 1) > 0.05 else "")
        except ValueError:
            classes.append("")
    body.append(html.table(HEADERS, rows, (1, 2, 3), classes))
    return html.page(f"{new.device_name} vs {ref.device_name}", body, "side-by-side of two hardware profiles")
