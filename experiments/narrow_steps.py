"""What does a narrow copy's K-step cost beyond the model's price? (CPU, read off committed sweeps)

An operand whose rows are 4- or 8-byte aligned but not 16 is copied asynchronously in 4- or 8-byte pieces.  For
every pointer-based config within 1.5x of its shape's best, this takes the measured time beyond the model's, per
wave and per K-step, by load class and K-steps, and for narrow classes at 9 K-steps or more against the narrow
warp-wide copies an SM issues per K-step (its resident programs' copies of the narrow operands).

    PYTHONPATH=$PWD python3 experiments/narrow_steps.py --profile profiles/nvidia-h200.h5 \
        reports/results/validate-wide-{855977,947201,147226,363726,711167,430594}-h200.json.gz
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fit_cv import sweep_timings  # noqa: E402
from theodolite.model.fast import alignment  # noqa: E402
from theodolite.model.predict import ConfigTable, evaluate  # noqa: E402

from theodolite.profile import load_profile  # noqa: E402

WARP = 32
NEAR_BEST = 1.5
K_BUCKETS = ((1, 2), (3, 8), (9, 32), (33, 10**9))
COPY_BUCKETS = ((0, 64), (64, 128), (128, 256), (256, 512), (512, 4096))


def load_class(a_vec: float, b_vec: float) -> str:
    """aligned (16-byte vectors), vec8 / vec4 (the narrowest operand's copy width), scalar (element-wise)."""
    low = min(a_vec, b_vec)
    return "aligned" if low >= 16 else "vec8" if low == 8 else "vec4" if low == 4 else "scalar"


def rows(profile_path: str, sweeps: list[str]) -> list[dict[str, float | str]]:
    """One row per near-best pointer-based config of a non-element-wise shape."""
    profile = load_profile(profile_path)
    out: list[dict[str, float | str]] = []
    for sweep in sweeps:
        by_shape = defaultdict(list)
        for timing in sweep_timings(Path(sweep)):
            by_shape[timing.shape].append(timing)
        for shape, timings in by_shape.items():
            table = ConfigTable(profile, shape[4])
            problem = timings[0].problem
            a_vec, b_vec, _ = alignment(problem, table.hw)
            klass = load_class(a_vec, b_vec)
            if klass == "scalar":
                continue
            times, terms = evaluate(table, problem, detail=True)
            best = min(t.seconds for t in timings)
            for timing in timings:
                if timing.key.startswith("tma") or timing.seconds > NEAR_BEST * best:
                    continue
                i = table.index[timing.key]
                config = table.configs[i]
                waves = max(float(terms["#waves"][i]), 1.0)
                steps = float(terms["#iterations"][i])
                narrow = (config.block_m * config.block_k * 2 / a_vec if a_vec < 16 else 0.0) + (
                    config.block_n * config.block_k * 2 / b_vec if b_vec < 16 else 0.0
                )
                excess = timing.seconds - float(times[i])
                out.append({
                    "class": klass, "steps": steps, "per_wave_us": excess / waves * 1e6,
                    "per_step_us": excess / waves / steps * 1e6, "pm": float(times[i]) / timing.seconds,
                    "copies": narrow / WARP * float(terms["#resident_per_sm"][i]),
                })  # fmt: skip
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", required=True)
    parser.add_argument("sweeps", nargs="+")
    args = parser.parse_args()
    data = rows(args.profile, args.sweeps)
    print("class    K-steps  configs  excess/wave  excess/step  predicted/measured (medians)")
    for klass in ("aligned", "vec8", "vec4"):
        for low, high in K_BUCKETS:
            sel = [r for r in data if r["class"] == klass and low <= float(r["steps"]) <= high]
            if sel:
                wave = np.median([float(r["per_wave_us"]) for r in sel])
                step = np.median([float(r["per_step_us"]) for r in sel])
                pm = np.median([float(r["pm"]) for r in sel])
                top = high if high < 10**9 else "inf"
                print(f"{klass:8s} {low:>3}-{top:<4} {len(sel):7d}  {wave:8.2f} us  {step:8.3f} us  {pm:.3f}")
    narrow = [r for r in data if r["class"] != "aligned" and float(r["steps"]) >= 9]
    print("narrow classes, >= 9 K-steps: excess per K-step against narrow warp copies per SM per K-step")
    for low, high in COPY_BUCKETS:
        sel = [r for r in narrow if low <= float(r["copies"]) < high]
        if sel:
            step = np.median([float(r["per_step_us"]) for r in sel])
            each = np.median([float(r["per_step_us"]) / float(r["copies"]) for r in sel])
            print(f"  {low:>4}-{high:<5} copies: {len(sel):4d} configs, {step:.3f} us a step, {each * 1e3:.2f} ns each")


if __name__ == "__main__":
    main()
