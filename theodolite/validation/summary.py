"""The summary figures of a results file, computed in one place for the terminal and the report page.

``shape_summary`` scores one shape (efficiency = oracle best / pick, <= 1; speed against torch.matmul; peers;
the rank correlation of predicted and measured times), read from the final round where it holds both sides;
``summarize`` aggregates them (geomeans, percentiles, the worst picks), ``summary_lines`` and ``print_summary``
print them, and ``shape_line`` is the sweep's one line per shape.  Pure: no GPU, no torch.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from theodolite.kernels.config import DTYPE_BYTES
from theodolite.results import TORCH_KEY, Results, ShapeResult, finite_ms


def _progress(total: int) -> Callable[[str], None]:
    """A tqdm bar on stderr when tqdm is present and there is something to do; a no-op otherwise."""
    try:
        from tqdm import tqdm
    except ImportError:
        return lambda _text: None
    import sys

    if total == 0 or not sys.stderr.isatty():
        return lambda _text: None
    bar = tqdm(total=total, unit="shape", file=sys.stderr, leave=False)

    def step(text: str) -> None:
        bar.set_postfix_str(text[:60])
        bar.update(1)
        if bar.n >= total:
            bar.close()

    return step


def shape_line(result: ShapeResult, seconds: float, index: int | None = None, total: int | None = None) -> str:
    row = shape_summary(result)
    head = f"[{index}/{total}] " if index is not None else ""
    eff = "-" if row["efficiency"] is None else f"{row['efficiency']:.3f}"
    vs = "-" if row["vs_torch"] is None else f"{row['vs_torch']:.2f}"
    return (
        f"{head}{result.name} {result.M}x{result.N}x{result.K}: pick {result.model_pick or '-'} eff {eff}, "
        f"vs torch x{vs} ({len(result.configs)} configs, {seconds:.1f}s)"
    )


def _geomean(values: Sequence[float]) -> float | None:
    positive = [v for v in values if v > 0 and math.isfinite(v)]
    return math.exp(sum(math.log(v) for v in positive) / len(positive)) if positive else None


def _percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile (numpy's default method), without numpy."""
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100.0
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def arithmetic_intensity(result: ShapeResult) -> float:
    """FLOP per byte of compulsory traffic (A and B read once, C written once)."""
    element = DTYPE_BYTES.get(result.dtype, 2)
    out = 4 if result.dtype in ("fp8e4m3", "fp8e5m2", "fp32", "tf32") else element
    traffic = result.batch * (element * (result.M * result.K + result.K * result.N) + out * result.M * result.N)
    return result.flops / traffic if traffic else 0.0


def shape_summary(result: ShapeResult) -> dict[str, Any]:
    """Per-shape figures: oracle best, pick time, efficiency (best/pick, <= 1), speed vs torch (torch/pick).

    Comparisons come from the final round (pick, best and torch.matmul timed side by side) where it holds
    them, else from the sweep; ``source`` says which the efficiency used."""
    final_best = result.final_best()
    best = final_best or result.best()
    pick_ms = result.configs.get(result.model_pick) if result.model_pick else None
    if result.model_pick and final_best is not None and finite_ms(result.final_ms.get(result.model_pick)):
        pick_ms = result.final_ms[result.model_pick]
    best_ms = best[1] if best else None
    efficiency, source = result.versus_best(result.model_pick)
    if result.model_pick and efficiency is None and result.best() is not None:
        efficiency = 0.0  # the pick failed to run (or gave a wrong result): the worst outcome
    vs_torch = result.torch_versus(result.model_pick) if result.model_pick else None
    best_vs_torch = result.torch_versus(None)
    predicted = result.model_predicted_ms.get(result.model_pick or "")
    peers: dict[str, float | None] = {}
    for peer, key in result.peer_picks.items():
        ratio, _ = result.versus_best(key)
        peers[peer] = ratio if ratio is not None else (0.0 if best_ms else None)
    return {
        "name": result.name,
        "shape": f"{result.M}x{result.N}x{result.K}",
        "intensity": arithmetic_intensity(result),
        "best_key": best[0] if best else None,
        "best_ms": best_ms,
        "pick_key": result.model_pick,
        "pick_ms": pick_ms,
        "predicted_ms": predicted,
        "efficiency": efficiency,
        "source": source,
        "vs_torch": vs_torch,
        "best_vs_torch": best_vs_torch,
        "torch_ms": result.final_ms.get(TORCH_KEY, result.torch_ms) if final_best else result.torch_ms,
        "peers": peers,
        "spearman": rank_correlation(result),
        "bottleneck": result.model_bottleneck,
    }


def rank_correlation(result: ShapeResult) -> float | None:
    """Spearman correlation of predicted and measured times over the configs that have both (>= 3)."""
    pairs = [
        (result.model_predicted_ms[k], ms)
        for k, ms in result.configs.items()
        if finite_ms(ms) and k in result.model_predicted_ms
    ]
    if len(pairs) < 3:
        return None
    from scipy.stats import spearmanr

    value = spearmanr([p for p, _ in pairs], [m for _, m in pairs]).statistic
    return None if value is None or not math.isfinite(float(value)) else float(value)


def summarize(results: Results, worst: int = 10) -> dict[str, Any]:
    """The summary figures of a validation (or bench) results file; every key present even when empty."""
    rows = [shape_summary(shape) for shape in results.shapes]
    effs = [r["efficiency"] for r in rows if r["efficiency"] is not None]
    vs = [r["vs_torch"] for r in rows if r["vs_torch"] is not None]
    best_vs = [r["best_vs_torch"] for r in rows if r["best_vs_torch"] is not None]
    sel = [s.selection_us for s in results.shapes if s.selection_us is not None]
    rho = [r["spearman"] for r in rows if r["spearman"] is not None]
    # how far the model's absolute time of its pick is from the pick's measured time (ranks need no absolute truth,
    # a person reading predicted_time_s does)
    absolute = [r["predicted_ms"] / r["pick_ms"] for r in rows if r["predicted_ms"] and r["pick_ms"]]
    auto = [s.autotune_wall_s for s in results.shapes if s.autotune_wall_s is not None]
    peers: dict[str, dict[str, Any]] = {}
    for peer in sorted({p for s in results.shapes for p in s.peer_picks}):
        values = [r["peers"][peer] for r in rows if r["peers"].get(peer) is not None]
        peers[peer] = {
            "shapes": len(values),
            "geomean": _geomean(values),
            "min": min(values) if values else None,
            "p5": _percentile(values, 5),
            "hit_rate": (sum(v >= 0.999999 for v in values) / len(values)) if values else None,
        }
    ranked = sorted((r for r in rows if r["efficiency"] is not None), key=lambda r: (r["efficiency"], r["name"]))
    errors = sum(1 for s in results.shapes for k in s.errors if not k.startswith("@"))
    wrong = sum(1 for s in results.shapes for e in s.errors.values() if e.startswith("wrong result"))
    return {
        "device": results.device,
        "shapes": len(results.shapes),
        "shapes_with_pick": sum(1 for s in results.shapes if s.model_pick),
        "final_round": sum(1 for r in rows if r["source"] == "final"),
        "configs_timed": sum(sum(1 for ms in s.configs.values() if finite_ms(ms)) for s in results.shapes),
        "config_errors": errors,
        "wrong_results": wrong,
        "pick_failed": sum(1 for r in rows if r["efficiency"] == 0.0),
        "efficiency": {
            "geomean": _geomean(effs),
            "p5": _percentile(effs, 5),
            "min": min(effs) if effs else None,
            "median": _percentile(effs, 50),
            "hit_rate": (sum(e >= 0.999999 for e in effs) / len(effs)) if effs else None,
            "within_5pct": (sum(e >= 0.95 for e in effs) / len(effs)) if effs else None,
        },
        "vs_torch": {"geomean": _geomean(vs), "min": min(vs) if vs else None, "max": max(vs) if vs else None},
        "best_vs_torch": {"geomean": _geomean(best_vs), "min": min(best_vs) if best_vs else None},
        "selection_us": {
            "median": _percentile(sel, 50),
            "p95": _percentile(sel, 95),
            "max": max(sel) if sel else None,
        },
        "spearman": {
            "median": _percentile(rho, 50),
            "mean": statistics.fmean(rho) if rho else None,
            "min": min(rho) if rho else None,
        },
        "absolute": {q: _percentile(absolute, p) for q, p in (("p10", 10), ("median", 50), ("p90", 90))},
        "autotune_s": {"mean": statistics.fmean(auto) if auto else None, "total": sum(auto) if auto else None},
        "peers": peers,
        "worst": [
            {
                k: r[k]
                for k in ("name", "shape", "efficiency", "pick_key", "pick_ms", "best_key", "best_ms", "bottleneck")
            }
            for r in ranked[:worst]
        ],
        "rows": rows,
    }


def _num(value: float | None, spec: str = ".3f") -> str:
    return "-" if value is None else format(value, spec)


def summary_lines(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """(figure, value) pairs for the terminal and the report page."""
    e, v, s = summary["efficiency"], summary["vs_torch"], summary["selection_us"]
    rho = summary["spearman"]
    lines = [
        ("shapes (with a model pick)", f"{summary['shapes']} ({summary['shapes_with_pick']})"),
        ("picks scored on the side-by-side final round", f"{summary['final_round']}"),
        ("selection efficiency geomean / p5 / min", f"{_num(e['geomean'])} / {_num(e['p5'])} / {_num(e['min'])}"),
        (
            "picks that are the oracle's best / within 5%",
            _num(e["hit_rate"], ".1%") + " / " + _num(e["within_5pct"], ".1%"),
        ),
        ("ours (model pick) vs torch.matmul geomean / min", f"x{_num(v['geomean'])} / x{_num(v['min'])}"),
        (
            "oracle best vs torch.matmul geomean / min",
            f"x{_num(summary['best_vs_torch']['geomean'])} / x{_num(summary['best_vs_torch']['min'])}",
        ),
        ("selection time median / p95 / max (us)", " / ".join(_num(s[q], ".0f") for q in ("median", "p95", "max"))),
        (
            "predicted-vs-measured Spearman median / mean / min",
            " / ".join(_num(rho[q]) for q in ("median", "mean", "min")),
        ),
        (
            "pick's predicted / measured time median / p10 / p90",
            " / ".join(_num(summary["absolute"][q], ".2f") for q in ("median", "p10", "p90")),
        ),
        (
            "autotune wall time mean / total (s)",
            f"{_num(summary['autotune_s']['mean'], '.2f')} / {_num(summary['autotune_s']['total'], '.1f')}",
        ),
        (
            "configs timed / failed / wrong results",
            f"{summary['configs_timed']} / {summary['config_errors']} / {summary['wrong_results']}",
        ),
    ]
    for peer, stats in summary["peers"].items():
        lines.append(
            (
                f"peer {peer}: efficiency geomean / p5 / min",
                f"{_num(stats['geomean'])} / {_num(stats['p5'])} / {_num(stats['min'])}",
            )
        )
    return lines


@dataclass(frozen=True)
class RecordedPick:
    """One shape's recorded pick against its fastest config (what model.selection_loss groups)."""

    M: int
    pick: str
    best: str
    efficiency: float


def recorded_picks(shape_rows: Sequence[tuple[ShapeResult, dict[str, Any]]]) -> list[RecordedPick]:
    """The shapes (with their ``shape_summary``) whose pick was recorded and timed."""
    return [
        RecordedPick(shape.M, str(row["pick_key"]), str(row["best_key"]), float(row["efficiency"]))
        for shape, row in shape_rows
        if row["pick_key"] and row["best_key"] and row["efficiency"] is not None
    ]


def print_summary(results: Results, stream: Any = None) -> dict[str, Any]:
    """Terminal summary table, the worst shapes and where selection loses; returns the summary dict."""
    import sys

    from rich.console import Console
    from rich.table import Table

    summary = summarize(results)
    console = Console(file=stream or sys.stdout, width=160)
    table = Table(title=f"validation summary: {results.device} {results.settings.get('suite', '')}")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for name, value in summary_lines(summary):
        table.add_row(name, value)
    console.print(table)
    if summary["worst"]:
        worst = Table(title="worst picks")
        for column in ("shape", "MxNxK", "efficiency", "model pick", "pick ms", "oracle best", "best ms", "bottleneck"):
            worst.add_column(column)
        for row in summary["worst"]:
            worst.add_row(
                row["name"],
                row["shape"],
                _num(row["efficiency"]),
                str(row["pick_key"]),
                _num(row["pick_ms"], ".4f"),
                str(row["best_key"]),
                _num(row["best_ms"], ".4f"),
                str(row["bottleneck"] or "-"),
            )
        console.print(worst)
    from theodolite.model.selection_loss import selection_losses

    groups = selection_losses(recorded_picks([(shape, shape_summary(shape)) for shape in results.shapes]))
    if groups:
        losses = Table(title="where selection loses (missed picks by picked -> fastest kind)")
        for column in ("picked -> fastest", "missed", "loss (-sum log efficiency)", "share", "geomean gain"):
            losses.add_column(column)
        for group in groups[:8]:
            losses.add_row(group.group, str(group.missed), _num(group.loss), f"{group.share:.1%}",
                           _num(group.geomean_gain, ".4f"))  # fmt: skip
        console.print(losses)
    return summary
