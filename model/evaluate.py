"""Offline evaluation of the model against a results JSON (every legal config timed per shape).

Selection efficiency = time of the fastest measured config / time of the chosen config
(1.0 = the model found the exhaustive best).  Also the Spearman rank correlation of
predicted vs measured time over each shape's measured configs, the worst shapes, and the
same efficiency for peers (a fixed config; nvMatmulHeuristics when it is installed).

    python -m theodolite.model.evaluate reports/results/validate-llm-h100.json \
        reports/results/validate-random-dev-h100.json --profile profiles/X.h5 [--fit P ... [--bars HINGE]] \
        [--write-profile X.h5]

Several results files are merged.  ``--bars`` fits for the selection bars per suite (``bars_loss``).
``--write-profile`` stores the model parameters that were fitted (or set) into a profile (method "model-fit",
settings naming the results files) through the atomic profile writer.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from theodolite.kernels.config import Problem
from theodolite.model.fast import choose_fast
from theodolite.model.predict import ConfigTable, _bottleneck, evaluate, table_for
from theodolite.model.selection_loss import GROUPINGS

from theodolite.profile.schema import Profile
from theodolite.results import Results, ShapeResult, load_results

FIXED_CONFIG = "persistent/128x128x64/g8/w8/s3/k1/f"
_FIXED_BEFORE_FLATTEN = "persistent/128x128x64/g8/w8/s3/k1"  # the same entry in results from before 2026-11-23


def fixed_pick(shape: ShapeResult, measured: dict[str, float]) -> str:
    """The fixed-config peer: the 128x128x64 w8 s3 persistent entry, under the key the results file used."""
    return _FIXED_BEFORE_FLATTEN if FIXED_CONFIG not in measured and _FIXED_BEFORE_FLATTEN in measured else FIXED_CONFIG


@dataclass
class ShapeScore:
    name: str
    M: int
    N: int
    K: int
    pick: str
    best: str
    best_ms: float
    pick_ms: float | None
    efficiency: float  # nan when the pick was not measured
    spearman: float
    torch_ms: float | None
    bottleneck: str = ""
    peers: dict[str, float] = field(default_factory=dict)  # peer -> efficiency
    vs_torch: float = math.nan  # torch time / pick time (final round where it holds both)
    predicted_ms: float = math.nan  # the model's time for its pick (absolute accuracy: against pick_ms)
    layout: str = ""  # nn, nt, ... (the breakdown by layout)
    # the pick's time as the model predicts it, within a stream of work: pick_ms less the flushed timing's event
    # bracket where the results hold their timing floors (``in_stream_ms``); nan: pick_ms as measured
    pick_stream_ms: float = math.nan


@dataclass
class Summary:
    shapes: list[ShapeScore]
    geomean: float
    p5: float
    minimum: float
    spearman_median: float
    unmeasured_picks: int
    peers: dict[str, dict[str, float]]  # peer -> {geomean, p5, min}
    vs_torch_geomean: float  # torch time / pick time (>1: faster than torch.matmul)
    # predicted / measured time of the picks: median, p10, p90 (how far an absolute prediction is to be trusted)
    absolute: dict[str, float] = field(default_factory=dict)


def in_stream_ms(shape: ShapeResult, measured_ms: float, floor: dict[str, float] | None) -> float:
    """``measured_ms`` as the model predicts it: a shape timed in L2-flushed runs pays its two events' bracket (an
    empty kernel there, ``floor["flushed_ms"]``, against ``floor["graph_ms"]`` per call in graph replays, where the
    rotated shapes are timed and where a layer of a model runs), so that difference comes off; nan without floors
    (results made before ``kernels.benchmark.timing_floors``)."""
    if not floor:
        return math.nan
    from theodolite.kernels.benchmark import event_bracket_ms, flushed_timing

    problem = _problem(shape)
    set_bytes = (shape.M * shape.K + shape.K * shape.N) * problem.element_bytes + shape.M * shape.N * (
        problem.output_bytes
    )
    if not flushed_timing(set_bytes * shape.batch, int(floor["l2_bytes"])):
        return measured_ms
    return max(measured_ms - event_bracket_ms(floor), 1e-6)


def absolute_accuracy(scores: Sequence[ShapeScore]) -> dict[str, float]:
    """Median, p10 and p90 of predicted / measured time of each measured pick (nan where none); the measured time in
    a stream of work (``pick_stream_ms``) where the results hold their timing floors."""
    ratios = [
        s.predicted_ms / (s.pick_stream_ms if math.isfinite(s.pick_stream_ms) else s.pick_ms)
        for s in scores
        if s.pick_ms and math.isfinite(s.predicted_ms)
    ]
    if not ratios:
        return {"median": math.nan, "p10": math.nan, "p90": math.nan, "count": 0}
    p10, median, p90 = np.percentile(ratios, [10, 50, 90])
    return {"median": float(median), "p10": float(p10), "p90": float(p90), "count": len(ratios)}


def _stats(values: Sequence[float]) -> dict[str, float]:
    array = np.array([v for v in values if math.isfinite(v) and v > 0], dtype=float)
    if array.size == 0:
        return {"geomean": math.nan, "p5": math.nan, "min": math.nan, "count": 0}
    return {
        "geomean": float(np.exp(np.mean(np.log(array)))),
        "p5": float(np.percentile(array, 5)),
        "min": float(array.min()),
        "count": int(array.size),
    }


def _problem(shape: ShapeResult) -> Problem:
    return Problem(shape.M, shape.N, shape.K, dtype=shape.dtype, batch=shape.batch, layout=shape.layout)


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    if x.size < 3:
        return math.nan
    from scipy.stats import spearmanr

    value = spearmanr(x, y).statistic
    return float(value) if value is not None and math.isfinite(value) else math.nan


def nvmmh_picker() -> Callable[[ShapeResult, dict[str, float]], str | None] | None:
    """A peer picker from NVIDIA's nvMatmulHeuristics (None when not installed): its best-listed
    config that exists in our measured space (matched on tile, stages, split)."""
    try:
        from theodolite.model import peers
    except ImportError:
        return None
    return peers.nvmmh_pick if peers.available() else None


def score_shape(
    table: ConfigTable,
    shape: ShapeResult,
    peer_pickers: dict[str, Callable[[ShapeResult, dict[str, float]], str | None]] | None = None,
    exact: bool = False,
) -> ShapeScore | None:
    measured = {key: ms for key, ms in shape.configs.items() if ms is not None and math.isfinite(ms) and ms > 0}
    if not measured:
        return None
    problem = _problem(shape)
    times, terms = evaluate(table, problem, detail=True)
    if exact:  # the full argmin (fitting: no candidate grids to rebuild)
        i = int(np.argmin(np.where(table.legal_mask(problem), times, math.inf)))
    else:
        i, _ = choose_fast(table, problem)  # exactly what select() picks
    if table.keys[i] not in measured and shape.configs.get(table.keys[i], 0) is not None:
        # the config space grew after the sweep: choose among the configs the sweep measured
        inside = np.array([key in measured for key in table.keys])
        i = int(np.argmin(np.where(table.legal_mask(problem) & inside, times, math.inf)))
    pick = table.keys[i]
    best_key = min(measured, key=lambda key: (measured[key], key))
    best_ms = measured[best_key]
    pick_ms = measured.get(pick)
    versus, _ = shape.versus_best(pick)  # the side-by-side final round where it holds the pick
    efficiency = versus if versus is not None else math.nan
    keys = [key for key in measured if key in table.index]
    predicted = np.array([times[table.index[key]] for key in keys])
    actual = np.array([measured[key] for key in keys])
    peers: dict[str, float] = {}
    for name, picker in (peer_pickers or {}).items():
        choice = picker(shape, measured)
        ratio = shape.versus_best(choice)[0] if choice in measured else None
        peers[name] = ratio if ratio is not None else math.nan
    return ShapeScore(
        shape.name, shape.M, shape.N, shape.K, pick, best_key, best_ms, pick_ms, efficiency,
        _spearman(predicted, actual), shape.torch_ms, _bottleneck(terms, i), peers,
        shape.torch_versus(pick) or math.nan, float(times[i]) * 1e3, shape.layout,
    )  # fmt: skip


def summarize(
    results: Results,
    profile: Profile,
    peer_pickers: dict[str, Callable[[ShapeResult, dict[str, float]], str | None]] | None = None,
    exact: bool = False,
) -> Summary:
    pickers = dict(peer_pickers or {})
    pickers.setdefault("fixed", fixed_pick)
    scores = []
    for shape in results.shapes:
        table = table_for(profile, shape.dtype)
        score = score_shape(table, shape, pickers, exact)
        if score is not None:
            if score.pick_ms:
                score.pick_stream_ms = in_stream_ms(shape, score.pick_ms, results.settings.get("timing_floor"))
            scores.append(score)
    eff = [s.efficiency for s in scores]
    stats = _stats(eff)
    spear = [s.spearman for s in scores if math.isfinite(s.spearman)]
    vs_torch = [s.vs_torch for s in scores]
    peers = {name: _stats([s.peers.get(name, math.nan) for s in scores]) for name in pickers}
    return Summary(
        shapes=scores,
        geomean=stats["geomean"],
        p5=stats["p5"],
        minimum=stats["min"],
        spearman_median=float(np.median(spear)) if spear else math.nan,
        unmeasured_picks=sum(1 for s in scores if not math.isfinite(s.efficiency)),
        peers=peers,
        vs_torch_geomean=_stats(vs_torch)["geomean"],
        absolute=absolute_accuracy(scores),
    )


FIT_FACTORS = (0.25, 0.5, 0.8, 1.25, 2.0, 4.0)
# coarse to fine: the factors of each round of the coordinate search (``fit(schedule=...)``)
FINE_SCHEDULE = (FIT_FACTORS, (0.7, 0.85, 1.15, 1.4), (0.9, 0.95, 1.05, 1.1))
# issue 6's selection bars per suite (geomean >= 0.97, p5 >= 0.90), with a margin: the targets of ``bars_loss``
BAR_GEOMEAN = 0.975
BAR_P5 = 0.91


def start_scale(name: str) -> float:
    """A typical magnitude for a parameter whose current value is 0 (seconds or cycles)."""
    return 1e-6 if name.endswith("launch_extra") else 8.0


def efficiency_loss(summary: Summary) -> float:
    """The default fit objective: -(log geomean + 0.5 log p5) over all shapes merged; a pick that was never measured
    scores as a 0.5 efficiency (else the fit learns to pick those)."""
    unmeasured = summary.unmeasured_picks / max(len(summary.shapes), 1)
    return -(math.log(summary.geomean) * (1 - unmeasured) + unmeasured * math.log(0.5)
             + 0.5 * math.log(max(summary.p5, 1e-6)))  # fmt: skip


def bars_loss(summary: Summary, hinge: float = 4.0, geomean: float = BAR_GEOMEAN, p5: float = BAR_P5) -> float:
    """A fit objective for the bars, which hold per suite: per suite -(log geomean + 0.5 log p5), plus ``hinge`` times
    its shortfall under the targets.  The merged objective can sink one suite's p5 for the other's geomean."""
    loss = 0.0
    for stats in per_suite(summary).values():
        loss -= math.log(stats["geomean"]) + 0.5 * math.log(max(stats["p5"], 1e-6))
        loss += hinge * (max(0.0, geomean - stats["geomean"]) + max(0.0, p5 - stats["p5"]))
    return loss


def fit(
    results: Results,
    profile: Profile,
    names: Sequence[str],
    rounds: int = 3,
    factors: Sequence[float] = FIT_FACTORS,
    loss: Callable[[Summary], float] = efficiency_loss,
    schedule: Sequence[Sequence[float]] | None = None,
) -> dict[str, float]:
    """Coordinate search of named model parameters for selection efficiency (``loss`` of the exact argmin's summary).

    Each round tries every parameter at every factor of its value, keeping what lowers the loss: ``rounds`` rounds of
    ``factors`` (stopping at a round that improves nothing), or one round per entry of ``schedule`` (coarse to fine).
    Returns the best values found; the process-wide overrides are left at them.
    """
    from theodolite.model.hardware import current_parameters, set_parameters

    values = {name: current_parameters(profile)[name] for name in names}

    def score(candidate: dict[str, float]) -> float:
        set_parameters(**candidate)
        summary = summarize(results, profile, {"fixed": fixed_pick}, exact=True)
        return loss(summary) if math.isfinite(summary.geomean) else math.inf

    best = score(values)
    for step in schedule if schedule is not None else [factors] * rounds:
        improved = False
        for name in names:
            for factor in step:
                trial = dict(values)
                trial[name] = values[name] * factor if values[name] else start_scale(name) * factor
                value = score(trial)
                if value < best - 1e-6:
                    best, values, improved = value, trial, True
        if not improved and schedule is None:
            break
    set_parameters(**values)
    return values


def write_parameters(
    profile: Profile, values: dict[str, float], path: str, results_files: Sequence[str], note: str = ""
) -> Profile:
    """Store fitted model parameters in a copy of ``profile`` written to ``path`` (atomically, replacing it).

    Each becomes a metric (unit from the schema, method "model-fit", settings naming the results files and
    every parameter fitted together), so the model reads it from the profile instead of its code default.
    """
    import dataclasses

    from theodolite.model.hardware import MODEL_PARAMETERS

    from theodolite.profile.hdf5 import save_profile
    from theodolite.profile.schema import METRICS, Measurement

    unknown = sorted(set(values) - set(MODEL_PARAMETERS))
    if unknown:
        raise KeyError(f"not model parameters: {', '.join(unknown)}")
    metrics = dict(profile.metrics)
    settings = {"results": [str(f) for f in results_files], "fitted_together": sorted(values)}
    for name, value in sorted(values.items()):
        metrics[name] = Measurement(
            name=name, value=float(value), unit=METRICS[name].unit, method="model-fit",
            samples=np.array([float(value)]), settings=settings, note=note or MODEL_PARAMETERS[name][1],
        )  # fmt: skip
    updated = dataclasses.replace(profile, metrics=metrics)
    save_profile(updated, path, overwrite=True)
    return updated


def suite_of(name: str) -> str:
    """The suite a shape name belongs to: random-dev's devNNN, the wide suites' wideNNN, else llm.csv's names."""
    if name.startswith("dev") and name[3:].isdigit():
        return "random-dev"
    if name.startswith("wide") and name[4:].isdigit():
        return "wide"
    return "llm"


# M of decode and skinny shapes: serving's decode batches, the shapes where the tile rows matter most
SKINNY_M = 64


def breakdown(summary: Summary) -> dict[str, dict[str, float]]:
    """Efficiency and Spearman by layout and by M (decode / skinny M <= SKINNY_M, larger): where the picks fail."""
    groups: dict[str, list[ShapeScore]] = {}
    for s in summary.shapes:
        if s.layout:
            groups.setdefault(f"layout {s.layout}", []).append(s)
        groups.setdefault(f"M <= {SKINNY_M}" if s.M <= SKINNY_M else f"M > {SKINNY_M}", []).append(s)
    return _grouped(groups)


def per_suite(summary: Summary) -> dict[str, dict[str, float]]:
    """Efficiency and Spearman per suite (by shape name: ``suite_of``)."""
    suites: dict[str, list[ShapeScore]] = {}
    for s in summary.shapes:
        suites.setdefault(suite_of(s.name), []).append(s)
    return _grouped(suites)


def _grouped(groups: dict[str, list[ShapeScore]]) -> dict[str, dict[str, float]]:
    out = {}
    for name, scores in sorted(groups.items()):
        stats = _stats([s.efficiency for s in scores])
        spear = [s.spearman for s in scores if math.isfinite(s.spearman)]
        stats["spearman_median"] = float(np.median(spear)) if spear else math.nan
        out[name] = stats
    return out


def format_summary(summary: Summary, worst: int = 15) -> str:
    lines = [
        f"shapes: {len(summary.shapes)}  (picks not measured: {summary.unmeasured_picks})",
        f"model: selection efficiency geomean {summary.geomean:.4f}  p5 {summary.p5:.4f}  min {summary.minimum:.4f}"
        f"  Spearman median {summary.spearman_median:.3f}  vs torch.matmul geomean {summary.vs_torch_geomean:.3f}",
    ]
    if summary.absolute.get("count"):
        a = summary.absolute
        in_stream = any(math.isfinite(s.pick_stream_ms) for s in summary.shapes)
        lines.append(
            f"absolute: predicted / measured time of the picks, median {a['median']:.3f}"
            f"  p10 {a['p10']:.3f}  p90 {a['p90']:.3f}  (n={a['count']})"
            + ("  (flushed timings less their event bracket: in_stream_ms)" if in_stream else "")
        )
    for name, stats in summary.peers.items():
        lines.append(
            f"peer {name}: geomean {stats['geomean']:.4f}  p5 {stats['p5']:.4f}  min {stats['min']:.4f}"
            f"  (n={stats['count']})"
        )
    groups = [(f"suite {name}", stats) for name, stats in per_suite(summary).items()]
    groups += list(breakdown(summary).items())
    for name, stats in groups:
        lines.append(
            f"{name}: geomean {stats['geomean']:.4f}  p5 {stats['p5']:.4f}  min {stats['min']:.4f}"
            f"  Spearman median {stats['spearman_median']:.3f}  (n={stats['count']})"
        )
    lines.append("")
    lines.append(f"worst {worst} shapes:")
    ordered = sorted(summary.shapes, key=lambda s: s.efficiency if math.isfinite(s.efficiency) else -1.0)
    for s in ordered[:worst]:
        pick_ms = f"{s.pick_ms:.4f}" if s.pick_ms else "n/a"
        lines.append(
            f"  {s.name:<24} {s.M:>6}x{s.N:>6}x{s.K:>6} eff {s.efficiency:.3f} rho {s.spearman:+.2f} "
            f"pick {s.pick} ({pick_ms} ms, {s.bottleneck}) best {s.best} ({s.best_ms:.4f} ms)"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m theodolite.model.evaluate", description=__doc__.split("\n")[0])
    parser.add_argument("results", nargs="+", help="results JSON (bench or validate); several are merged")
    parser.add_argument("--profile", default=None, help="profile file (default: resolution order)")
    parser.add_argument("--worst", type=int, default=15)
    parser.add_argument("--no-peers", action="store_true", help="skip nvMatmulHeuristics")
    parser.add_argument("--fit", nargs="*", default=None, metavar="PARAM", help="fit these model parameters first")
    parser.add_argument(
        "--bars", type=float, default=None, metavar="HINGE",
        help="fit for the selection bars per suite (bars_loss with this hinge), coarse to fine",
    )  # fmt: skip
    parser.add_argument("--set", nargs="*", default=[], metavar="PARAM=VALUE", help="set model parameters")
    parser.add_argument(
        "--write-profile", default=None, metavar="PATH",
        help="store the fitted/set parameters in this profile (a copy of --profile; replaced atomically)",
    )  # fmt: skip
    parser.add_argument("--note", default="", help="with --write-profile: why these values (kept with each metric)")
    parser.add_argument(
        "--losses", choices=tuple(GROUPINGS), default=None,
        help="also print where selection loses: missed picks grouped by picked -> fastest kind, or tile, or by M band",
    )  # fmt: skip
    args = parser.parse_args(argv)
    from theodolite.api import resolve

    profile = resolve(args.profile)
    from theodolite.results import merge_results

    loaded = [load_results(path) for path in args.results]
    results = loaded[0] if len(loaded) == 1 else merge_results(loaded)
    stored: dict[str, float] = {}
    if args.set:
        from theodolite.model.hardware import set_parameters

        stored.update({item.split("=")[0]: float(item.split("=")[1]) for item in args.set})
        set_parameters(**stored)
    if args.fit is not None:
        names = args.fit or ["model_latency_hiding", "model_iteration_overhead", "model_tile_overhead"]
        values = (
            fit(results, profile, names)
            if args.bars is None
            else fit(results, profile, names, loss=lambda s: bars_loss(s, args.bars), schedule=FINE_SCHEDULE)
        )
        stored.update(values)
        print("fitted: " + ", ".join(f"{name}={value:.4g}" for name, value in values.items()))
    if args.write_profile:
        if not stored:
            parser.error("--write-profile needs --fit or --set (nothing to store)")
        write_parameters(profile, stored, args.write_profile, args.results, note=args.note)
        print(f"wrote {', '.join(sorted(stored))} to {args.write_profile} (method model-fit)")
    pickers = {}
    if not args.no_peers:
        picker = nvmmh_picker()
        if picker is not None:
            pickers["nvmmh"] = picker
    summary = summarize(results, profile, pickers)
    print(f"{args.results} on profile {profile.origin} ({profile.device_name}, {profile.provenance.source})")
    print(format_summary(summary, args.worst))
    if args.losses:
        from theodolite.model.selection_loss import format_losses

        print()
        print(format_losses(summary.shapes, args.losses))
    return 0


if __name__ == "__main__":
    sys.exit(main())
