"""How much does a spilling binary cost?  The measured time of every timed config of the committed nt sweeps, over
the model's time for it, relative to the shape's median of that ratio, grouped by the spill (bytes per thread) of the
nt build that ran.  CPU only: the validation files and the bundled profile's nt builds.  The sweeps before nt builds
of their own were legal by the nn builds, so they timed configs whose nt binary spills; ``SPILL_MAX_BYTES`` is read
off this table::

    PYTHONPATH=$PWD python3 experiments/spill_cost.py [reports/results/validate-*-h200.json ...]
"""

from __future__ import annotations

import collections
import glob
import math
import statistics
import sys

from theodolite.model.evaluate import _problem, load_results
from theodolite.model.predict import alignment_and_loads, evaluate, table_for

from theodolite.profile.hdf5 import load_profile

BUCKETS = ((0, "0"), (64, "1-64"), (128, "65-128"), (400, "129-400"), (math.inf, ">400"))


def bucket(spill: int) -> str:
    return next(name for top, name in BUCKETS if spill <= top)


def main(paths: list[str]) -> None:
    profile = load_profile("profiles/nvidia-h200.h5")
    table = table_for(profile, "bf16")
    groups: dict[tuple[str, str], list[float]] = collections.defaultdict(list)
    for path in paths:
        for shape in load_results(path).shapes:
            if shape.layout != "nt" or shape.dtype != "bf16":
                continue
            problem = _problem(shape)
            loads = alignment_and_loads(problem, table.hw)[3]
            times, _ = evaluate(table, problem)
            ratio = {
                key: math.log(ms * 1e-3 / times[table.index[key]])
                for key, ms in shape.configs.items()
                if ms and math.isfinite(ms) and key in table.index
            }
            if len(ratio) < 5:
                continue
            middle = statistics.median(ratio.values())
            for key, value in ratio.items():
                config = table.configs[table.index[key]]
                build = profile.kernel_build(config.variant, key, "bf16", loads, "nt")
                if build is not None:
                    groups[(loads, bucket(build.n_spills))].append(value - middle)
    print("loads     spill (B)  timings  measured / model, relative to the shape's median (median)")
    for (loads, name), values in sorted(groups.items()):
        print(f"{loads:9s} {name:9s} {len(values):8d}  {math.exp(statistics.median(values)):.3f}")


if __name__ == "__main__":
    main(sys.argv[1:] or sorted(p for p in glob.glob("reports/results/validate-*-h200.json") if "decode" not in p))
