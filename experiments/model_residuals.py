"""Where does the model's error sit?  log(predicted / measured) of every timed (shape, config) tabulated by variant,
tile, the term the model says bounds the config, M bucket and K depth, and the worst picks; on an exhaustive sweep
(every legal config timed) and on the calibration timings a profile stores.  Also the pointer-based and TMA configs
of one tile that the model prices within 2% of each other: their measured ratio.  CPU only.

    PYTHONPATH=$PWD python3 experiments/model_residuals.py [--profile P.h5] [--sweep RESULTS.json | --stored]
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from theodolite.model.calibration_fit import Timing, overrides
from theodolite.model.predict import ConfigTable, evaluate

from theodolite.profile import load_profile

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fit_cv import PROFILES, SWEEP, sweep_timings  # noqa: E402
from theodolite.probes.model_stage import stored_timings  # noqa: E402


def regime(terms: dict[str, np.ndarray], i: int) -> str:
    """The term that sets the config's time, as the model has it."""
    sm, l2, hbm = float(terms["sm_time"][i]), float(terms["l2_time"][i]), float(terms["hbm_time"][i])
    fix = float(terms["fixup"][i] + terms["launch"][i])
    if fix > max(sm, l2, hbm):
        return "fixed"
    if l2 >= max(sm, hbm):
        return "l2"
    if hbm >= sm:
        return "hbm"
    it = {n: float(terms[f"iter_{n}"][i]) for n in ("compute", "issue", "latency", "l2")}
    if float(terms["#iterations"][i]) * float(terms["iter_total"][i]) < float(terms["fixed_per_item"][i]):
        return "sm-fixed"
    return "sm-" + max(it, key=lambda n: it[n])


def bucket_m(m: int) -> str:
    return "M<=16" if m <= 16 else "M<=64" if m <= 64 else "M<=256" if m <= 256 else "M>256"


def bucket_k(k: int) -> str:
    return "K<=256" if k <= 256 else "K<=2048" if k <= 2048 else "K>2048"


def table(rows: Sequence[tuple[str, float]], title: str) -> None:
    groups: dict[str, list[float]] = defaultdict(list)
    for key, value in rows:
        groups[key].append(value)
    print(f"-- {title}: n, median log(pred/meas), p10, p90")
    for key in sorted(groups, key=lambda g: -len(groups[g])):
        v = np.array(groups[key])
        print(f"  {key:28s} {len(v):5d} {np.median(v):+.3f} {np.percentile(v, 10):+.3f} {np.percentile(v, 90):+.3f}")


def analyse(profile_path: str, timings: Sequence[Timing], worst: int = 15) -> None:
    profile = load_profile(profile_path)
    by_shape: dict[tuple, list[Timing]] = defaultdict(list)
    for t in timings:
        by_shape[t.shape].append(t)
    tables: dict[str, ConfigTable] = {}
    rows: dict[str, list[tuple[str, float]]] = defaultdict(list)
    picks = []
    same_tile: list[tuple[str, float]] = []  # (tile, pointer-based time / TMA time) where the model prices them alike
    for shape, ts in by_shape.items():
        table_ = tables.get(shape[4]) or tables.setdefault(shape[4], ConfigTable(profile, shape[4]))
        times, terms = evaluate(table_, ts[0].problem, detail=True)
        pred = {}
        for t in ts:
            i = table_.index[t.key]
            pred[t.key] = float(times[i])
            r = math.log(times[i] / t.seconds)
            variant, tile = t.key.split("/")[:2]
            rows["variant"].append((variant, r))
            rows["tile"].append((tile.split("+")[0], r))
            rows["regime"].append((regime(terms, i), r))
            rows["M"].append((bucket_m(t.m), r))
            rows["K"].append((bucket_k(t.k), r))
            rows["variant x regime"].append((f"{variant} {regime(terms, i)}", r))
        pick = min(ts, key=lambda t: pred[t.key])
        best = min(ts, key=lambda t: t.seconds)
        measured = {t.key: t.seconds for t in ts}
        for key, seconds in measured.items():
            twin = "tma/" + key.removeprefix("persistent/")
            if not key.startswith("persistent/") or twin not in measured:
                continue
            if min(seconds, measured[twin]) <= 1.2 * best.seconds and abs(pred[key] - pred[twin]) <= 0.02 * pred[twin]:
                same_tile.append((key.split("/")[1] + "/" + key.split("/")[3], seconds / measured[twin]))
        kinds = (regime(terms, table_.index[pick.key]), regime(terms, table_.index[best.key]))
        picks.append((best.seconds / pick.seconds, shape, pick.key, pred[pick.key] / pick.seconds, best.key,
                      pred[best.key] / best.seconds, *kinds))  # fmt: skip
    for name, r in rows.items():
        table(r, name)
    if same_tile:
        ratios = np.array([r for _, r in same_tile])
        print(f"== pointer-based / TMA time, one tile, priced within 2%, near the best: {len(ratios)} pairs, geomean "
              f"{np.exp(np.mean(np.log(ratios))):.3f}, TMA faster in {np.mean(ratios > 1):.0%}")  # fmt: skip
        table([(tile, math.log(r)) for tile, r in same_tile], "same tile: log(pointer-based / TMA)")
    eff = np.array([p[0] for p in picks])
    print(f"== {len(picks)} shapes: geomean {np.exp(np.mean(np.log(eff))):.3f} p5 {np.percentile(eff, 5):.3f} "
          f"min {eff.min():.3f} pick pred/meas {np.median([p[3] for p in picks]):.2f}")  # fmt: skip
    for p in sorted(picks)[:worst]:
        print(f"  {p[0]:.2f} {p[1][:3]} pick {p[2]} ({p[3]:.2f}, {p[6]}) best {p[4]} ({p[5]:.2f}, {p[7]})")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--profile", default=str(PROFILES[0]))
    parser.add_argument("--sweep", default=str(SWEEP))
    parser.add_argument("--stored", action="store_true", help="the profile's stored calibration timings")
    parser.add_argument("--worst", type=int, default=15)
    parser.add_argument("--set", action="append", default=[], help="NAME=VALUE: a model parameter overridden")
    args = parser.parse_args(argv)
    if args.stored:
        timings = stored_timings(load_profile(args.profile)).get("calibration", [])
    else:
        timings = sweep_timings(Path(args.sweep))
    values = {name: float(value) for name, value in (item.split("=") for item in args.set)}
    with overrides(values):
        analyse(args.profile, timings, args.worst)
    return 0


if __name__ == "__main__":
    sys.exit(main())
