"""The model-validation page of a results file: how close the model's picks come to the exhaustive best."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from theodolite.reports import html  # noqa: E402

from theodolite.results import Results, load_results, results_stem  # noqa: E402
from theodolite.validation import recorded_picks, shape_summary, summarize, summary_lines  # noqa: E402

INTRO = (
    "For every shape, torch.matmul and every legal kernel config (the exhaustive oracle) were timed side by side "
    "on the same random inputs. Selection efficiency is the oracle's best time divided by the time of the model's "
    "pick (1.0: the model picked the fastest config). 'vs torch' is torch.matmul's time divided by the pick's "
    "(above 1: ours is faster)."
)
_MARKERS = {"fixed": "s", "nvmmh": "^", "autotune": "D"}


def efficiency_vs_intensity(summary: dict[str, Any]) -> Any | None:
    rows = [r for r in summary["rows"] if r["efficiency"] is not None and r["intensity"] > 0]
    if not rows:
        return None
    figure, axis = plt.subplots(figsize=(8, 4.5))
    bottlenecks = sorted({str(r["bottleneck"]) for r in rows})
    for bottleneck in bottlenecks:
        chosen = [r for r in rows if str(r["bottleneck"]) == bottleneck]
        axis.scatter(
            [r["intensity"] for r in chosen],
            [r["efficiency"] for r in chosen],
            s=18,
            label=f"model ({bottleneck}-bound)" if bottleneck != "None" else "model",
        )
    for peer in summary["peers"]:
        chosen = [r for r in summary["rows"] if r["peers"].get(peer) is not None and r["intensity"] > 0]
        axis.scatter(
            [r["intensity"] for r in chosen],
            [r["peers"][peer] for r in chosen],
            s=14,
            marker=_MARKERS.get(peer, "x"),
            facecolors="none",
            edgecolors="gray",
            alpha=0.6,
            label=peer,
        )
    axis.axhline(1.0, color="black", linewidth=0.8)
    axis.axhline(0.9, color="gray", linestyle=":", linewidth=0.8)
    axis.set_xscale("log")
    axis.set_ylim(-0.02, 1.05)
    axis.set_xlabel("arithmetic intensity (FLOP per byte of A, B and C)")
    axis.set_ylabel("selection efficiency (best / pick)")
    axis.set_title("Selection efficiency vs arithmetic intensity")
    axis.grid(True, alpha=0.3)
    axis.legend(fontsize=7)
    return figure


def efficiency_cdf(summary: dict[str, Any]) -> Any | None:
    """Fraction of shapes whose pick reaches at least a given efficiency: the model against each peer."""
    series = {"model": [r["efficiency"] for r in summary["rows"] if r["efficiency"] is not None]}
    for peer in summary["peers"]:
        series[peer] = [r["peers"][peer] for r in summary["rows"] if r["peers"].get(peer) is not None]
    series = {k: sorted(v) for k, v in series.items() if v}
    if not series:
        return None
    figure, axis = plt.subplots(figsize=(7, 4.2))
    for name, values in series.items():
        count = len(values)
        fractions = [1 - i / count for i in range(count)]
        axis.step(values, fractions, where="post", linewidth=2 if name == "model" else 1.2, label=f"{name} ({count})")
    axis.set_xlim(max(0.0, min(min(v) for v in series.values()) - 0.05), 1.01)
    axis.set_ylim(0, 1.02)
    axis.set_xlabel("selection efficiency (best / pick)")
    axis.set_ylabel("fraction of shapes at or above")
    axis.set_title("How often each selector gets within x of the best")
    axis.grid(True, alpha=0.3)
    axis.legend(fontsize=8)
    return figure


def predicted_vs_measured(results: Results) -> Any | None:
    every: list[tuple[float, float]] = []
    picks: list[tuple[float, float]] = []
    for shape in results.shapes:
        for key, ms in shape.configs.items():
            predicted = shape.model_predicted_ms.get(key)
            if predicted and ms and math.isfinite(ms) and ms > 0 and predicted > 0:
                every.append((predicted, ms))
                if key == shape.model_pick:
                    picks.append((predicted, ms))
    if not every:
        return None
    figure, axis = plt.subplots(figsize=(6.5, 6))
    axis.scatter([p for p, _ in every], [m for _, m in every], s=4, alpha=0.25, color="gray", label="every config")
    axis.scatter([p for p, _ in picks], [m for _, m in picks], s=18, color="C3", label="model's pick")
    low = min(min(p, m) for p, m in every)
    high = max(max(p, m) for p, m in every)
    axis.plot([low, high], [low, high], color="black", linewidth=0.8, label="predicted = measured")
    axis.set_xscale("log")
    axis.set_yscale("log")
    axis.set_xlabel("predicted time (ms)")
    axis.set_ylabel("measured time (ms)")
    axis.set_title("Predicted vs measured time")
    axis.grid(True, alpha=0.3)
    axis.legend(fontsize=7)
    return figure


def ours_vs_torch(summary: dict[str, Any]) -> Any | None:
    rows = [r for r in summary["rows"] if r["vs_torch"] is not None or r["best_vs_torch"] is not None]
    if not rows:
        return None
    rows.sort(key=lambda r: r["vs_torch"] if r["vs_torch"] is not None else r["best_vs_torch"])
    figure, axis = plt.subplots(figsize=(min(12.0, max(8.0, 0.09 * len(rows) + 4)), 4.5))
    index = list(range(len(rows)))
    ratios = [r["vs_torch"] for r in rows]
    colors = ["#55a868" if (v or 0) >= 1 else "#c44e52" for v in ratios]
    axis.bar(index, [(v - 1) if v is not None else 0 for v in ratios], bottom=1, color=colors, label="model's pick")
    best = [(i, r["best_vs_torch"]) for i, r in zip(index, rows, strict=True) if r["best_vs_torch"] is not None]
    axis.scatter([i for i, _ in best], [v for _, v in best], s=10, color="black", zorder=3, label="oracle best")
    axis.axhline(1.0, color="black", linewidth=0.8)
    axis.set_xlabel("shapes, sorted")
    axis.set_ylabel("torch.matmul time / our time")
    axis.set_title("Ours vs torch.matmul per shape (above 1: ours faster)")
    if len(rows) <= 40:
        axis.set_xticks(index)
        axis.set_xticklabels([f"{r['name']} {r['shape']}" for r in rows], rotation=70, ha="right", fontsize=6)
    axis.grid(True, axis="y", alpha=0.3)
    axis.legend(fontsize=7)
    return figure


def _profile_for(results: Results, profile_path: str | None) -> tuple[Any, str]:
    """The profile to explain picks with: the one given, else the one whose fingerprint the run recorded."""
    from theodolite.validation import load_validation_profile

    if profile_path is not None:
        profile = load_validation_profile(profile_path)
        same = profile.fingerprint == results.profile_fingerprint
        return profile, "" if same or not results.profile_fingerprint else " (profile differs from the run's)"
    from theodolite.profile import load_profile
    from theodolite.profile.datasheet import DATASHEETS
    from theodolite.profile.resolve import bundled_profiles

    candidates: list[Any] = []
    if results.profile_path and Path(results.profile_path).is_file():
        candidates.append(lambda: load_profile(results.profile_path))
    candidates += [lambda path=path: load_profile(path) for path in bundled_profiles()]
    candidates += list(DATASHEETS.values())
    for make in candidates:
        try:
            profile = make()
        except Exception:
            continue
        if results.profile_fingerprint and profile.fingerprint == results.profile_fingerprint:
            return profile, ""
    return None, ""


def _breakdowns(results: Results, rows: list[dict[str, Any]], profile_path: str | None) -> dict[str, str]:
    """The model's predicted breakdown of the pick and of the oracle's best for the worst shapes, if it can say."""
    try:
        from theodolite.kernels.config import GemmConfig, Problem
        from theodolite.model import predict

        profile, note = _profile_for(results, profile_path)
    except Exception:
        return {}
    if profile is None:
        return {}
    out: dict[str, str] = {}
    by_name = {(s.name, f"{s.M}x{s.N}x{s.K}"): s for s in results.shapes}
    for row in rows:
        shape = by_name.get((row["name"], row["shape"]))
        if shape is None:
            continue
        problem = Problem(shape.M, shape.N, shape.K, dtype=shape.dtype, layout=shape.layout, batch=shape.batch)
        parts = []
        for label, key in (("pick", row["pick_key"]), ("best", row["best_key"])):
            if not key:
                continue
            try:
                prediction = predict(problem, GemmConfig.from_key(key), profile)
            except Exception:
                continue
            top = sorted(prediction.breakdown.items(), key=lambda item: -item[1])[:4]
            terms = ", ".join(f"{k} {v * 1e6:.1f}" for k, v in top)
            parts.append(f"{label}: {prediction.time_s * 1e6:.1f} us, {prediction.bottleneck}-bound ({terms} us)")
        if parts:
            out[row["name"] + row["shape"]] = "; ".join(parts) + note
    return out


def _losses_table(shape_rows: list[tuple[Any, dict[str, Any]]]) -> str:
    """The recorded picks that missed the fastest config, grouped by the kind picked against the kind that won
    (model.selection_loss): which part of the model to look at first.  ``shape_rows``: (shape, shape_summary)."""
    from theodolite.model.selection_loss import selection_losses

    rows = [
        [g.group, str(g.missed), _fmt(g.loss), f"{g.share:.1%}", _fmt(g.geomean_gain, ".4f")]
        for g in selection_losses(recorded_picks(shape_rows))[:12]
    ]
    if not rows:
        return "<p class='small'>Every recorded pick is the fastest config (or none was recorded).</p>"
    caption = (
        "<p class='small'>Missed picks by the kind picked -> the kind that ran fastest (<code>+</code> a composite "
        "tile, <code>/f</code> a flattened loop); loss: the sum of -log efficiency; the last column: the suite's "
        "geomean were those picks the fastest, over what it is. <code>python -m theodolite.model.evaluate FILE "
        "--losses kind</code> re-picks with a profile.</p>"
    )
    return caption + html.table(
        ["picked -> fastest", "missed", "loss", "share", "geomean gain"], rows, numeric=(1, 2, 3, 4)
    )


def _fmt(value: float | None, spec: str = ".3f") -> str:
    return "-" if value is None else format(value, spec)


def render_validation(results: Results, profile_path: str | None = None, source: str = "") -> str:
    summary = summarize(results, worst=15)
    settings = results.settings
    body = [
        f"<p>{html.esc(results.device)} &middot; {len(results.shapes)} shapes &middot; suite "
        f"{html.esc(settings.get('suite', '?'))} &middot; dtype {html.esc(settings.get('dtype', '?'))} &middot; "
        f"profile fingerprint <code>{html.esc(results.profile_fingerprint or '-')}</code></p>",
        f"<p>{html.esc(INTRO)}</p>",
    ]
    if settings.get("incomplete"):
        body.append(
            "<p class='missing'>This results file is incomplete (stopped by its time budget or "
            "interrupted): the figures cover the shapes measured so far.</p>"
        )
    body.append("<h2>Summary</h2>")
    body.append(html.table(["figure", "value"], summary_lines(summary), numeric=(1,)))
    body.append("<h2>Selection efficiency vs arithmetic intensity</h2>")
    body.append(
        html.plot_or_missing(
            efficiency_vs_intensity(summary),
            "efficiency vs intensity",
            "one point per shape; hollow markers: peers",
            "no shape has a model pick",
        )
    )
    body.append("<h2>Model against peers</h2>")
    body.append(
        html.plot_or_missing(
            efficiency_cdf(summary),
            "efficiency distribution",
            "read at x = 0.9: the fraction of shapes each selector gets within 10% of the best",
            "no shape has a pick",
        )
    )
    body.append("<h2>Predicted vs measured time</h2>")
    body.append(
        html.plot_or_missing(
            predicted_vs_measured(results),
            "predicted vs measured",
            "grey: every config of every shape; red: the model's pick",
            "no predicted times in this results file",
        )
    )
    body.append("<h2>Ours vs torch.matmul</h2>")
    body.append(
        html.plot_or_missing(ours_vs_torch(summary), "ours vs torch", "per shape, sorted", "no torch.matmul timing")
    )
    body.append("<h2>Where selection loses</h2>")
    shape_rows = [(shape, shape_summary(shape)) for shape in results.shapes]
    body.append(_losses_table(shape_rows))
    body.append("<h2>Worst picks</h2>")
    explained = _breakdowns(results, summary["worst"], profile_path)
    if summary["worst"] and not explained:
        body.append(
            "<p class='small'>The model's breakdown is not shown: no profile with the run's fingerprint "
            f"({html.esc(results.profile_fingerprint or '-')}) was found; pass --profile.</p>"
        )
    rows = [
        [
            w["name"],
            w["shape"],
            _fmt(w["efficiency"]),
            str(w["pick_key"]),
            _fmt(w["pick_ms"], ".4f"),
            str(w["best_key"]),
            _fmt(w["best_ms"], ".4f"),
            str(w["bottleneck"] or "-"),
            explained.get(w["name"] + w["shape"], ""),
        ]
        for w in summary["worst"]
    ]
    body.append(
        html.table(
            [
                "shape",
                "MxNxK",
                "efficiency",
                "model pick",
                "pick ms",
                "oracle best",
                "best ms",
                "bottleneck",
                "model's predicted breakdown",
            ],
            rows,
            numeric=(2, 4, 6),
        )
    )
    body.append("<h2>Every shape</h2>")
    every = []
    for shape, r in shape_rows:
        peers = ", ".join(f"{p} {_fmt(v)}" for p, v in sorted(r["peers"].items()))
        every.append(
            [
                r["name"],
                r["shape"],
                _fmt(r["intensity"], ".0f"),
                _fmt(r["efficiency"]),
                _fmt(r["vs_torch"], ".2f"),
                _fmt(r["best_vs_torch"], ".2f"),
                _fmt(r["torch_ms"], ".4f"),
                _fmt(r["pick_ms"], ".4f"),
                _fmt(r["predicted_ms"], ".4f"),
                _fmt(r["spearman"], ".2f"),
                peers,
                _fmt(shape.selection_us, ".0f"),
                _fmt(shape.autotune_wall_s, ".1f"),
            ]
        )
    body.append(
        html.table(
            [
                "shape",
                "MxNxK",
                "FLOP/B",
                "efficiency",
                "vs torch",
                "best vs torch",
                "torch ms",
                "pick ms",
                "predicted ms",
                "Spearman",
                "peers (efficiency)",
                "selection us",
                "autotune s",
            ],
            every,
            numeric=tuple(range(2, 13)),
        )
    )
    body.append("<h2>Provenance</h2>")
    prov = [
        ["results file", source],
        ["command", results.command],
        ["made (UTC)", results.created_utc],
        ["torch", results.torch_version],
        ["triton", results.triton_version],
        ["theodolite", results.theodolite_version],
        ["profile", results.profile_path],
    ]
    prov += [[f"setting: {k}", str(v)] for k, v in sorted(settings.items())]
    body.append(html.table(["field", "value"], [p for p in prov if p[1]]))
    return html.page(f"Model validation: {results.device}", body, "model picks against the exhaustive oracle")


def write_validation_page(
    path: str | os.PathLike[str], directory: str | os.PathLike[str], profile_path: str | None = None
) -> Path:
    results = load_results(path)
    stem = results_stem(path)
    return html.write_page(render_validation(results, profile_path, str(path)), Path(directory) / f"{stem}.html")
