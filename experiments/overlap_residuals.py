"""Do kernels run longer than max(SM time, memory time) where the two are close? (CPU, read off committed sweeps)

The model takes a kernel's time as the larger of its SM time (K-steps, fixed costs, epilogues) and its memory time
(L2 and HBM traffic as a shared fluid): each hides the other completely.  For every config within 1.5x of its
shape's best (shapes whose best runs 20 us or more), this takes log(measured / predicted) less the shape's mean over
those configs (what the shape's level costs every config alike), and groups it by x = min / max of the two times,
for memory-bound and SM-bound configs apart.  A rise toward x = 1 is time the maximum leaves out where neither
stream dominates: the p-norm (sm^p + mem^p)^(1/p) has that form, 2^(1/p) at x = 1.

    PYTHONPATH=$PWD python3 experiments/overlap_residuals.py --profile profiles/nvidia-h200.h5 \
        reports/results/validate-wide-{855977,947201,363726,147226,711167,430594}-h200.json.gz \
        reports/results/validate-{random-dev,llm,llm-nt}-h200.json
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fit_cv import sweep_timings  # noqa: E402
from theodolite.model.predict import ConfigTable, evaluate  # noqa: E402

from theodolite.profile import load_profile  # noqa: E402

NEAR_BEST = 1.5
MIN_BEST_S = 20e-6


def points(profile_path: str, sweeps: list[str]) -> np.ndarray:
    """Rows (x, demeaned log residual, memory-bound 1/0) of the near-best configs of every shape."""
    profile = load_profile(profile_path)
    out: list[tuple[float, float, float]] = []
    for sweep in sweeps:
        by_shape = defaultdict(list)
        for t in sweep_timings(Path(sweep)):
            by_shape[(t.m, t.n, t.k, t.layout, t.dtype)].append(t)
        for shape, timings in by_shape.items():
            best = min(t.seconds for t in timings)
            if best < MIN_BEST_S:
                continue
            table = ConfigTable(profile, shape[4])
            times, terms = evaluate(table, timings[0].problem, detail=True)
            rows = []
            for t in timings:
                if t.seconds > NEAR_BEST * best:
                    continue
                i = table.index[t.key]
                sm, mem = float(terms["sm_time"][i]), float(terms["mem_time"][i])
                rows.append((min(sm, mem) / max(sm, mem), math.log(t.seconds / float(times[i])), float(mem > sm)))
            if len(rows) < 3:
                continue
            mean = float(np.mean([r[1] for r in rows]))
            out.extend((x, r - mean, bound) for x, r, bound in rows)
    return np.array(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", required=True)
    parser.add_argument("sweeps", nargs="+")
    args = parser.parse_args()
    table = points(args.profile, args.sweeps)
    for bound, name in ((1.0, "memory-bound"), (0.0, "SM-bound")):
        part = table[table[:, 2] == bound]
        print(f"{name} configs: {len(part)}")
        for low in np.arange(0.0, 1.0, 0.1):
            cell = part[(part[:, 0] >= low) & (part[:, 0] < low + 0.1)]
            if len(cell) > 10:
                print(f"  x {low:.1f}-{low + 0.1:.1f}  n={len(cell):5d}  mean {cell[:, 1].mean():+.3f}")


if __name__ == "__main__":
    main()
