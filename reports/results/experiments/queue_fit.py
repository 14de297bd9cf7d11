"""Refit the model's named parameters against issue 6's bars per suite, with some configs left out (offline, no GPU).

Why: ``python -m theodolite.model.evaluate --fit`` scores both suites merged (geomean and p5 of all shapes), while the
bars are per suite (llm and random-dev each: geomean >= 0.97, p5 >= 0.90); a fit for the merged figure can sink one
suite's p5 for the other's geomean.  And which deep-pipeline configs the model can rank is a question of the space, so
``--without`` takes configs out of the space and out of the measured sets (sweep and final round) for this process.

    # from the repository root, the config space and profile under test in the work tree:
    python reports/results/experiments/queue_fit.py GPU_FILES... --profile P [--without KEY...] \
        [--fit PARAM...] [--set PARAM=VALUE...] [--hinge 20]

Without ``--fit`` it prints ``evaluate``'s summary (the fast path, as ``select`` picks).  The fit is a coordinate
search, coarse to fine (factors 0.25-4, then 0.7-1.4, then 0.9-1.1), on the exact argmin (``summarize(exact=True)``);
its loss per suite is -(log geomean + 0.5 log p5) plus ``hinge`` x the shortfall under 0.975 / 0.91 (a margin over
the bars).  Nothing is written: print the values and pass them to ``evaluate --set ... --write-profile`` to keep them.
Used in the twentieth session (README, "The loaded-latency K-step, refit per suite").
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Sequence

GEOMEAN_TARGET = 0.975  # issue 6's 0.97 with a margin
P5_TARGET = 0.91  # issue 6's 0.90 with a margin
SCHEDULE = ((0.25, 0.5, 0.8, 1.25, 2.0, 4.0), (0.7, 0.85, 1.15, 1.4), (0.9, 0.95, 1.05, 1.1))


def leave_out(keys: set[str]) -> None:
    """Take ``keys`` out of the kernels' config space (this process, before any table is built) and out of every
    results file ``evaluate`` loads from now on."""
    if not keys:
        return
    import theodolite.model.evaluate as ev
    from theodolite.kernels import config as kernel_config

    space = kernel_config._space
    kernel_config._space = lambda dtype, variant: tuple(  # type: ignore[assignment]
        c for c in space(dtype, variant) if c.key not in keys
    )
    load = ev.load_results

    def load_without(path: str):  # type: ignore[no-untyped-def]
        results = load(path)
        for shape in results.shapes:
            for key in keys:
                shape.configs.pop(key, None)
                shape.final_ms.pop(key, None)
        return results

    ev.load_results = load_without  # type: ignore[assignment]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("results", nargs="+")
    parser.add_argument("--profile", required=True)
    parser.add_argument("--without", nargs="*", default=[], metavar="KEY")
    parser.add_argument("--fit", nargs="*", default=None, metavar="PARAM")
    parser.add_argument("--set", nargs="*", default=[], metavar="PARAM=VALUE")
    parser.add_argument("--hinge", type=float, default=4.0, help="weight of the shortfall under the targets")
    parser.add_argument("--p5-target", type=float, default=P5_TARGET, help="p5 under which the hinge applies")
    parser.add_argument("--worst", type=int, default=15)
    args = parser.parse_args(argv)
    leave_out(set(args.without))
    import theodolite.model.evaluate as ev
    from theodolite.model.hardware import current_parameters, set_parameters
    from theodolite.profile.hdf5 import load_profile
    from theodolite.results import merge_results

    profile = load_profile(args.profile)
    loaded = [ev.load_results(path) for path in args.results]
    results = loaded[0] if len(loaded) == 1 else merge_results(loaded)
    fixed = {item.split("=")[0]: float(item.split("=")[1]) for item in args.set}
    set_parameters(**fixed)
    if args.fit is None:
        print(ev.format_summary(ev.summarize(results, profile, {}), args.worst))
        return 0

    def score(values: dict[str, float]) -> tuple[float, dict[str, tuple[float, float, float]]]:
        set_parameters(**{**fixed, **values})
        suites = ev.per_suite(ev.summarize(results, profile, {"fixed": ev.fixed_pick}, exact=True))
        loss = 0.0
        for stats in suites.values():
            loss -= math.log(stats["geomean"]) + 0.5 * math.log(max(stats["p5"], 1e-6))
            loss += args.hinge * (max(0.0, GEOMEAN_TARGET - stats["geomean"]) + max(0.0, args.p5_target - stats["p5"]))
        return loss, {name: (s["geomean"], s["p5"], s["spearman_median"]) for name, s in suites.items()}

    values = {name: current_parameters(profile)[name] for name in args.fit}
    values.update({name: fixed[name] for name in args.fit if name in fixed})
    started = time.time()
    best, info = score(values)
    print(f"start {values} loss {best:.4f} {info}", flush=True)
    for factors in SCHEDULE:
        for name in args.fit:
            for factor in factors:
                trial = dict(values)
                trial[name] = values[name] * factor if values[name] else ev.start_scale(name) * factor
                loss, trial_info = score(trial)
                if loss < best - 1e-6:
                    best, values, info = loss, trial, trial_info
                    print(f"  {name}={trial[name]:.5g} loss {best:.4f} {info}", flush=True)
    print(f"fitted in {time.time() - started:.0f} s: " + " ".join(f"{k}={v:.6g}" for k, v in values.items()))
    print(f"per suite (geomean, p5, Spearman median), exact argmin: {info}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
