"""Calibrate's model stage on this GPU, then the model it wrote scored out of sample: wide shapes drawn from a seed
chosen after the calibration (os.urandom, printed and stored), in nn and nt, and llm.csv in nt, within one time
limit.  JSON and HTML under $OUT, a table last.

    PYTHONPATH=$PWD python3 experiments/calibrate_validate.py [--profile P.h5] [--total-s 520] [--wide 40]
        [--calibrated $OUT/cal.h5] [--dry-run]

The profile defaults to the bundled one of this GPU (profiles/<slug>.h5).  ``--dry-run`` prints the commands and
the time split without running them (no GPU needed); ``--calibrated`` skips the calibration and scores a profile it
wrote earlier on a fresh seed (more out-of-sample shapes in a second call).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARES = {"wide-nn": 0.4, "wide-nt": 0.35, "llm-nt": 0.25}  # of the time left after calibrate
REPORT_S = 20.0  # seconds kept for the report pages and the table
MARGIN = 0.85  # a validate's --budget-s is this share of its slice: its last shape may run past the budget


def bundled_profile() -> Path:
    import torch

    from theodolite.profile.resolve import slug

    return ROOT / "profiles" / f"{slug(torch.cuda.get_device_name(0))}.h5"


def post_seed() -> int:
    """A seed nobody chose: drawn after the calibration, so its shapes cannot have steered it."""
    return int.from_bytes(os.urandom(4), "little") % 1_000_000


def validate_commands(profile: Path, out: Path, seed: int, wide: int, left_s: float) -> dict[str, list[str]]:
    """The three validate runs, each with its slice of ``left_s`` as --budget-s."""
    python = [sys.executable, "-m", "theodolite", "validate", "--profile", str(profile), "--peers", ""]
    suites = {
        "wide-nn": ["--shapes", f"wide:{wide}:{seed}", "--layout", "nn"],
        "wide-nt": ["--shapes", f"wide:{wide}:{seed}", "--layout", "nt"],
        "llm-nt": ["--shapes", "llm", "--layout", "nt"],
    }
    return {
        name: [*python, *args, "--budget-s", f"{max(10.0, SHARES[name] * left_s * MARGIN):.0f}", "-o",
               str(out / f"{name}.json")]
        for name, args in suites.items()
    }  # fmt: skip


def summary_row(path: Path) -> dict[str, object]:
    """Selection efficiency (geomean, p5, min), median Spearman and the picks' predicted / measured of a results
    file, from the validation summary."""
    from theodolite.results import load_results
    from theodolite.validation.summary import summarize

    summary = summarize(load_results(path))
    efficiency, spearman, absolute = summary["efficiency"], summary["spearman"], summary["absolute"]
    return {
        "shapes": summary["shapes"], "efficiency_geomean": efficiency["geomean"], "efficiency_p5": efficiency["p5"],
        "efficiency_min": efficiency["min"], "spearman_median": spearman["median"],
        "pick_pred_over_meas_median": absolute["median"], "wrong_results": summary["wrong_results"],
    }  # fmt: skip


def run(command: Sequence[str], timeout_s: float, log: Callable[[str], None]) -> tuple[int, float]:
    log("$ " + " ".join(f"'{c}'" if c == "" else c for c in command))
    begin = time.perf_counter()
    try:
        code = subprocess.call(list(command), timeout=timeout_s, env={**os.environ, "PYTHONPATH": str(ROOT)})
    except subprocess.TimeoutExpired:
        code = 124
    return code, time.perf_counter() - begin


def main(argv: Sequence[str] | None = None, log: Callable[[str], None] = lambda t: print(t, flush=True)) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--profile", type=Path, default=None, help="the profile to recalibrate (default: bundled)")
    parser.add_argument("--total-s", type=float, default=520.0, help="wall-clock limit of the whole script")
    parser.add_argument(
        "--wide", type=int, default=40, help="wide shapes drawn (all are precompiled within the budget)"
    )
    parser.add_argument("--calibrated", type=Path, default=None,
                        help="validate this calibrated profile again (a new seed) instead of calibrating")  # fmt: skip
    parser.add_argument("--calibrate-s", type=float, default=260.0, help="expected calibrate time (dry run)")
    parser.add_argument("--dry-run", action="store_true", help="print the commands and the time split only")
    args = parser.parse_args(argv)
    if args.total_s < 120:
        parser.error(f"--total-s {args.total_s:.0f}: the calibration alone needs about 200 s")
    out = Path(os.environ.get("OUT", "."))
    out.mkdir(parents=True, exist_ok=True)
    begin = time.perf_counter()
    profile = args.profile if args.profile is not None or args.dry_run else bundled_profile()
    calibrated = out / "cal.h5"
    calibrate = [sys.executable, "-m", "theodolite", "calibrate", "--model-only", str(profile), "-o", str(calibrated),
                 "--force"]  # fmt: skip
    record: dict[str, object] = {"profile": str(profile), "calibrate": " ".join(calibrate[1:])}
    if args.dry_run:
        seed = post_seed()
        left = args.total_s - args.calibrate_s - REPORT_S
        log("$ " + " ".join(calibrate))
        for name, command in validate_commands(calibrated, out, seed, args.wide, left).items():
            log(f"[{name}] $ " + " ".join(f"'{c}'" if c == "" else c for c in command))
        return 0
    if args.calibrated is not None:
        calibrated, code, seconds = args.calibrated, 0, 0.0
        record["calibrate"] = f"(earlier) {calibrated}"
    else:
        code, seconds = run(calibrate, args.total_s - 60, log)
    record["calibrate_s"] = seconds
    if code != 0 or not calibrated.is_file():
        log(f"calibrate exited {code} after {seconds:.0f} s")
        (out / "calibrate-validate.json").write_text(json.dumps(record, indent=1))
        return code or 1
    seed = post_seed()  # after the calibration, on purpose
    record["seed"] = seed
    log(f"out-of-sample seed {seed} (os.urandom, drawn after the calibration)")
    results: dict[str, dict[str, object]] = {}
    left = args.total_s - (time.perf_counter() - begin) - REPORT_S
    for name, command in validate_commands(calibrated, out, seed, args.wide, left).items():
        slice_s = SHARES[name] * left
        code, seconds = run(command, slice_s + 45, log)
        path = out / f"{name}.json"
        results[name] = {"command": " ".join(command[1:]), "exit": code, "seconds": seconds}
        if path.is_file():
            results[name].update(summary_row(path))
    record["validate"] = results
    from theodolite.model.hardware import MODEL_PARAMETERS

    from theodolite.profile import load_profile

    cal = load_profile(calibrated)
    record["device"] = cal.device_name
    record["parameters"] = {n: {"value": m.value, "method": m.method, "flagged": m.flagged}
                            for n, m in cal.metrics.items() if n in MODEL_PARAMETERS}  # fmt: skip
    record["wall_s"] = time.perf_counter() - begin
    (out / "calibrate-validate.json").write_text(json.dumps(record, indent=1, default=str))
    pages = [out / f"{name}.json" for name in results if (out / f"{name}.json").is_file()]
    if pages and time.perf_counter() - begin < args.total_s - 10:
        run([sys.executable, "-m", "theodolite", "report", str(calibrated), "--results", *map(str, pages), "-o",
             str(out / "html")], max(5.0, args.total_s - (time.perf_counter() - begin) - 5), log)  # fmt: skip
    from theodolite.probes.model_stage import show

    log(show(cal))
    log(f"{cal.device_name}: calibrate {record['calibrate_s']:.0f} s, seed {seed}, wall {record['wall_s']:.0f} s")
    log(f"{'suite':8s} {'shapes':>6s} {'geomean':>8s} {'p5':>6s} {'min':>6s} {'rho':>6s} {'pred/meas':>9s}")
    for name, row in results.items():
        log(f"{name:8s} {_fmt(row.get('shapes'), 'd'):>6s} {_fmt(row.get('efficiency_geomean')):>8s} "
            f"{_fmt(row.get('efficiency_p5')):>6s} {_fmt(row.get('efficiency_min')):>6s} "
            f"{_fmt(row.get('spearman_median')):>6s} {_fmt(row.get('pick_pred_over_meas_median')):>9s}")  # fmt: skip
    return 0


def _fmt(value: object, spec: str = ".3f") -> str:
    return format(value, spec) if isinstance(value, (int, float)) else "-"


if __name__ == "__main__":
    sys.exit(main())
