"""Does the model stage's fit generalise?  Cross-validated (by shape) scores of fit variants on the calibration
timings a profile stores, and the selection efficiency of each variant (fitted on all of them) on an exhaustive
sweep (every legal config timed) as a development check.  CPU only: the timings are the profile's.

    PYTHONPATH=$PWD python3 experiments/fit_cv.py [--profiles P.h5 ...] [--sweep RESULTS.json] [--variants a,b]
        [--folds 5] [-o fit-cv.json]

The sweep is a development set only (which config classes the model mis-ranks): nothing here fits on it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from theodolite.model.calibration_cv import cross_validate, fit_regularised, selection_scores
from theodolite.model.calibration_fit import LEVEL, Objective, Timing, fit, floors
from theodolite.model.calibration_probes import FIT_PARAMETERS, l2_scale_floor, probe_parameters
from theodolite.model.hardware import MODEL_PARAMETERS
from theodolite.probes.model_stage import stored_timings

from theodolite.profile import load_profile
from theodolite.profile.schema import Profile
from theodolite.results import read_json

ROOT = Path(__file__).resolve().parents[1]
PROFILES = (ROOT / "profiles" / "nvidia-h100-80gb-hbm3.h5", ROOT / "profiles" / "nvidia-h200.h5")
SWEEP = ROOT / "reports" / "results" / "validate-wide-h100.json.gz"
DEFAULTS = {name: MODEL_PARAMETERS[name][0] for name in MODEL_PARAMETERS}


@dataclasses.dataclass(frozen=True)
class Variant:
    """A fit: which parameters, under which objective, prior weight fixed or chosen by inner cross-validation."""

    names: tuple[str, ...]
    objective: Objective = LEVEL
    choose_weight: bool = False
    with_probes: bool = False  # the probes' timings join the fit's data (never held out)
    l2_floor: bool = False  # model_l2_bandwidth_scale bounded below by the iteration probe's K-step slope


def variants() -> dict[str, Variant]:
    prior = Objective(prior=DEFAULTS)
    regret = Objective(regret=1.0, prior=DEFAULTS)
    fitted = tuple(FIT_PARAMETERS)
    few = tuple(n for n in fitted if n not in ("model_flatten_hiding", "model_composite_iteration_overhead"))
    return {
        "defaults": Variant(()),
        "level": Variant(fitted),
        "level+prior": Variant(fitted, prior, True),
        "regret": Variant(fitted, Objective(regret=1.0)),
        "regret+prior": Variant(fitted, regret, True),
        "regret4+prior": Variant(fitted, Objective(regret=4.0, prior=DEFAULTS), True),
        "level-2": Variant(few),
        "regret+prior-2": Variant(few, regret, True),
        "joint": Variant(fitted, LEVEL, False, True),
        "joint+prior": Variant(fitted, prior, True, True),
        "joint+regret+prior": Variant(fitted, regret, True, True),
        # the tile loads' HBM share fitted too (model_hbm_bandwidth_scale, structural 1.0 in the model stage)
        "level+prior+hbm": Variant((*fitted, "model_hbm_bandwidth_scale"), prior, True),
        "level+prior+l2floor": Variant(fitted, prior, True, l2_floor=True),
        "level+prior+hbm+l2floor": Variant((*fitted, "model_hbm_bandwidth_scale"), prior, True, l2_floor=True),
    }


def stripped(profile: Profile) -> Profile:
    """The profile without its fitted parameters: a fit starts from the code defaults, not from the stored fit of
    the very timings it is scored on."""
    metrics = {n: m for n, m in profile.metrics.items() if n not in FIT_PARAMETERS}
    return dataclasses.replace(profile, metrics=metrics)


def sweep_timings(path: Path) -> list[Timing]:
    """Every (shape, config) timing of a validate results file (its exhaustive sweep), in seconds."""
    data = read_json(path)
    rows = []
    for shape in data["shapes"]:
        for key, ms in (shape.get("configs") or {}).items():
            if ms and math.isfinite(ms) and ms > 0:
                rows.append(Timing(shape["M"], shape["N"], shape["K"], shape["layout"], key, ms / 1e3, shape["dtype"]))
    return rows


def run_variant(profile: Profile, timings: Sequence[Timing], base: dict[str, float], variant: Variant, folds: int,
                sweep: Sequence[Timing], probed: Sequence[Timing]) -> dict[str, object]:  # fmt: skip
    start = time.perf_counter()
    extra = probed if variant.with_probes else ()
    cv = cross_validate(profile, timings, variant.names, base, variant.objective, variant.choose_weight, folds,
                        extra=extra)  # fmt: skip
    values = dict(base)
    chosen = None
    if variant.names:
        if variant.choose_weight:
            result, choice = fit_regularised(profile, timings, variant.names, base, variant.objective, extra=extra)
            chosen = choice.weight
        else:
            result = fit(profile, [*timings, *extra], variant.names, base, bootstrap=0, objective=variant.objective)
        values.update(result.values)
    out: dict[str, object] = {"cv": cv, "prior_weight": chosen, "values": {n: values[n] for n in variant.names}}
    out["in_sample"] = selection_scores(profile, timings, values)
    if sweep:
        out["sweep"] = selection_scores(profile, sweep, values)
    out["seconds"] = time.perf_counter() - start
    return out


def main(argv: Sequence[str] | None = None, log: Callable[[str], None] = lambda text: print(text, flush=True)) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--profiles", nargs="+", default=[str(p) for p in PROFILES])
    parser.add_argument("--sweep", default=str(SWEEP), help="validate results of an exhaustive sweep ('' for none)")
    parser.add_argument("--variants", default="", help="comma-separated variant names (default: all)")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("-o", "--output", default="")
    args = parser.parse_args(argv)
    table = variants()
    chosen = [v for v in args.variants.split(",") if v] or list(table)
    unknown = [v for v in chosen if v not in table]
    if unknown:
        parser.error(f"unknown variant(s) {', '.join(unknown)} (known: {', '.join(table)})")
    sweep_all = sweep_timings(Path(args.sweep)) if args.sweep else []
    sweep_device = read_json(Path(args.sweep))["device"] if args.sweep else ""
    report: dict[str, object] = {}
    lines = []
    for path in args.profiles:
        measured = load_profile(path)
        profile = stripped(measured)
        stored = stored_timings(measured)
        timings = stored.get("calibration", [])
        probed = [t for source, rows in stored.items() if source != "calibration" for t in rows]
        base = {name: measured.value(name) for name in probe_parameters()}
        sweep = sweep_all if measured.device_name == sweep_device else []
        per: dict[str, object] = {}
        for name in chosen:
            # the L2 scale no lower than the iteration probe's timings allow (calibration_probes.l2_scale_floor)
            floor = l2_scale_floor(measured, stored.get("iteration", [])) if table[name].l2_floor else {}
            with floors(floor):
                per[name] = result = run_variant(profile, timings, base, table[name], args.folds, sweep, probed)
            cv = result["cv"]
            sw = result.get("sweep") or {}
            line = (f"{measured.device_name[:12]:12s} {name:16s} cv geo {cv['geomean']:.3f} p5 {cv['p5']:.3f} "
                    f"min {cv['min']:.3f} rms {cv['log_rms']:.3f} abs {cv['abs_median']:.2f} "
                    f"rho {cv['spearman_median']:.2f} w {cv.get('prior_weight_median', '-')}")  # fmt: skip
            if sw:
                line += (f" | sweep geo {sw['geomean']:.3f} p5 {sw['p5']:.3f} min {sw['min']:.3f} "
                         f"rho {sw['spearman_median']:.2f} abs {sw['abs_median']:.2f}")  # fmt: skip
            log(line + f"  ({result['seconds']:.0f} s)")
            lines.append(line)
        report[path] = {"shapes": len({t.shape for t in timings}), "timings": len(timings), "variants": per}
    if args.output:
        Path(args.output).write_text(json.dumps(report, indent=1))
    log("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
