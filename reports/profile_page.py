"""The HTML sheet of one hardware profile: what was measured, how, and how sure, for a first-time reader."""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

from theodolite.reports import html, plots

from theodolite.profile.schema import METRICS, Profile
from theodolite.units import format_quantity

INTRO = (
    "This page shows one hardware profile made by theodolite: the figures its GEMM model reads to pick a "
    "kernel configuration. A measured profile carries the raw sweeps the values were derived from; a "
    "datasheet profile carries published figures only, so its sweep plots are marked 'not measured'."
)


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "profile"


def _spread(profile: Profile, name: str) -> str:
    measurement = profile.metrics[name]
    if math.isnan(measurement.p10) or math.isnan(measurement.p90):
        return ""
    low = format_quantity(measurement.p10, measurement.unit, 3)
    return f"{low} .. {format_quantity(measurement.p90, measurement.unit, 3)}"


def value_rows(profile: Profile) -> list[list[str]]:
    """metric, value, p10..p90, CV, samples, method, note; schema order groups the metrics by subsystem."""
    rows = []
    for name in list(METRICS) + sorted(set(profile.metrics) - set(METRICS)):
        if name not in profile.metrics:
            continue
        m = profile.metrics[name]
        cv = "" if math.isnan(m.cv) else f"{m.cv:.1%}"
        method = f"{m.method} v{m.method_version}" if m.method != "datasheet" else "datasheet"
        note = ("NOISY (CV over threshold). " if m.flagged else "") + m.note
        description = METRICS[name].description if name in METRICS else ""
        rows.append(
            [
                name,
                format_quantity(m.value, m.unit),
                _spread(profile, name),
                cv,
                str(m.samples.size),
                method,
                description,
                note,
            ]
        )
    return rows


def provenance_rows(profile: Profile) -> list[list[str]]:
    p = profile.provenance
    rows = [
        ["device", p.device_name],
        ["vendor", p.vendor],
        ["architecture", p.architecture],
        ["source", p.source],
        ["made (UTC)", p.created_utc],
        ["driver", p.driver],
        ["runtime", p.runtime],
        ["torch", p.torch_version],
        ["triton", p.triton_version],
        ["host", p.host],
        ["theodolite", p.theodolite_version],
        ["schema", profile.schema_version],
        ["fingerprint", profile.fingerprint],
        ["file", str(profile.origin)],
        ["notes", p.notes],
    ]
    return [row for row in rows if row[1]]


def render_profile(profile: Profile) -> str:
    """The whole page as one self-contained HTML string."""
    p = profile.provenance
    source_badge = "good" if p.source == "measured" else "bad"
    body = [
        f'<p><span class="badge {source_badge}">{html.esc(p.source)}</span> '
        f"{html.esc(p.architecture)} &middot; fingerprint <code>{html.esc(profile.fingerprint)}</code></p>",
        f"<p>{html.esc(INTRO)}</p>",
    ]
    body.append("<h2>Bandwidth vs working-set size</h2>")
    body.append(
        "<p class='small'>Read bandwidth as the data touched grows: it falls when the working set no longer fits "
        "a cache. The dashed red line is the detected knee (the effective L2 capacity the model uses); the dotted "
        "grey line is the L2 size the driver reports.</p>"
    )
    body.append(
        html.plot_or_missing(
            plots.bandwidth_vs_working_set(profile),
            "bandwidth vs working-set size",
            "bandwidth against working-set size; shaded: p10..p90 per point where stored",
            "no bandwidth-vs-working-set sweep in this profile",
        )
    )
    body.append("<h2>Latency ladder</h2>")
    body.append("<p class='small'>Load-to-use latency in SM clock cycles for each level of the memory hierarchy.</p>")
    body.append(
        html.plot_or_missing(
            plots.latency_ladder(profile),
            "latency ladder",
            "latency per memory level (cycles)",
            "no latency metric or pointer-chase sweep in this profile",
        )
    )
    body.append("<h2>Throughput vs number of programs (wave staircase)</h2>")
    body.append(
        "<p class='small'>A fixed amount of work per program: throughput rises until every SM is busy and then "
        "steps at each multiple of the SM count, where a partial last wave leaves SMs idle.</p>"
    )
    body.append(
        html.plot_or_missing(
            plots.wave_staircase(profile),
            "wave staircase",
            "throughput (or time) against programs launched; dotted lines at multiples of the SM count",
            "no programs sweep in this profile",
        )
    )
    body.append("<h2>Bandwidth vs SMs</h2>")
    body.append(
        "<p class='small'>Read bandwidth with one streaming program per SM, for 1..all SMs: a level saturates "
        "where the curve flattens (the dashed line marks 90% of HBM's best).</p>"
    )
    body.append(
        html.plot_or_missing(
            plots.bandwidth_vs_sms(profile),
            "bandwidth vs SMs",
            "bandwidth against the number of SMs streaming",
            "no bandwidth-vs-SMs sweep in this profile",
        )
    )
    body.append("<h2>Roofline</h2>")
    body.append(
        "<p class='small'>Attainable throughput against arithmetic intensity (FLOP per byte moved): solid lines, "
        "one per dtype, are the matrix-unit ceilings bounded by HBM bandwidth; dashed lines are the memory "
        "ceilings (L2 and HBM).</p>"
    )
    body.append(
        html.plot_or_missing(
            plots.roofline(profile),
            "roofline",
            "roofline with the profile's compute and memory ceilings",
            "the profile lacks a throughput or bandwidth ceiling",
        )
    )
    others = plots.other_curves(profile)
    if others:
        body.append("<h2>Other sweeps</h2>")
        for name, figure in others:
            body.append(html.plot_or_missing(figure, name, name, name))
    body.append("<h2>Values</h2>")
    body.append(
        "<p class='small'>Each value is the median of its samples; p10..p90 and the coefficient of variation (CV) "
        "show its spread; 'method' names the probe (and version) that measured it.</p>"
    )
    body.append(
        html.table(
            ["metric", "value", "p10 .. p90", "CV", "samples", "method", "meaning", "note"],
            value_rows(profile),
            numeric=(1, 3, 4),
            row_classes=["fail" if profile.metrics[row[0]].flagged else "" for row in value_rows(profile)],
        )
    )
    if profile.unsupported:
        body.append("<h3>Not supported on this device</h3>")
        body.append(html.table(["metric", "reason"], sorted(profile.unsupported.items())))
    if profile.curves:
        body.append("<h3>Stored sweeps</h3>")
        rows = [
            [
                c.name,
                str(c.x.size),
                f"{c.x_label or 'x'} ({c.x_unit})",
                f"{c.y_label or 'y'} ({c.y_unit})",
                c.method,
                ", ".join(f"{k}={v}" for k, v in c.attrs.items()),
            ]
            for c in profile.curves.values()
        ]
        body.append(html.table(["curve", "points", "x", "y", "method", "attributes"], rows, numeric=(1,)))
    if profile.kernel_builds:
        body.append("<h3>Kernel builds</h3>")
        spills = sum(1 for b in profile.kernel_builds if b.n_spills > 0)
        body.append(
            f"<p class='small'>{len(profile.kernel_builds)} compiled configs recorded; {spills} spill registers "
            "(the model treats those as illegal).</p>"
        )
        rows = [
            [b.variant, b.config_key, b.dtype, b.architecture, str(b.n_regs), str(b.n_spills), str(b.shared_bytes)]
            for b in profile.kernel_builds[:400]
        ]
        body.append(html.table(["variant", "config", "dtype", "arch", "regs", "spills", "shared B"], rows, (4, 5, 6)))
    body.append("<h2>Provenance</h2>")
    body.append(html.table(["field", "value"], provenance_rows(profile)))
    return html.page(f"Hardware profile: {p.device_name}", body, f"{p.source} profile, {p.architecture}")


def write_profile_page(profile: Profile, directory: str | os.PathLike[str], name: str | None = None) -> Path:
    """Render ``profile`` into ``directory/<name>.html`` (default: the profile file's stem or the device slug)."""
    stem = name or (
        Path(str(profile.origin)).stem if str(profile.origin).endswith(".h5") else slug(profile.device_name)
    )
    return html.write_page(render_profile(profile), Path(directory) / f"{stem}.html")
