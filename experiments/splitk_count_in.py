"""Does every split-K program pay its count-in (two L2 round trips holding its SM slot), or only the last?

Each split-K program stores its fp32 partial, releases it and adds itself to the tile's counter (acq_rel, waiting for
the value); only the last to arrive reduces.  In committed sweeps doubling a split cost ~0.7 us more per added
program per SM than the model priced when only the last slice's path paid the trips.  This times one weight stream
(M = 8, nt, 264 tiles of 16x64: two waves of programs per slice) at splits 1-16 and sets the model with and
without ``core.SPLITK_COUNT_IN_TRIPS`` beside them.

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/splitk_count_in.py                 # GPU: $OUT/splitk-count-in-GPU.json
    PYTHONPATH=$PWD python3 experiments/splitk_count_in.py --summary F.json PROFILE # no GPU
"""

from __future__ import annotations

import json
import math
import os

SHAPES = [("n16896k8192", 8, 16896, 8192), ("n16896k2048", 8, 16896, 2048)]
SPLITS = (2, 4, 8, 16)
CONFIGS = ("persistent/16x64x128/g8/w4/s4/k1", *(f"splitk/16x64x128/g8/w4/s4/k{s}" for s in SPLITS))


def run(out: str) -> None:
    from harness import bench_configs, gpu_name

    bench_configs(SHAPES, CONFIGS, os.path.join(out, f"splitk-count-in-{gpu_name()}.json"), "bf16", "nt")


def summary(path: str, profile_path: str) -> None:
    """Measured us per config, the model's with every program's count-in and with the last slice's only."""
    from theodolite.kernels.config import Problem
    from theodolite.model import core
    from theodolite.model.predict import clear_tables, evaluate, table_for

    from theodolite.profile.hdf5 import load_profile

    with open(path) as stream:
        shapes = json.load(stream)["shapes"]
    profile = load_profile(profile_path)
    trips = core.SPLITK_COUNT_IN_TRIPS
    models = {}
    for value in (trips, 0.0):
        core.SPLITK_COUNT_IN_TRIPS = value
        clear_tables()
        table = table_for(profile, "bf16")
        models[value] = {s["name"]: evaluate(table, Problem(s["M"], s["N"], s["K"], layout="nt"))[0] for s in shapes}
    core.SPLITK_COUNT_IN_TRIPS = trips
    clear_tables()
    for shape in shapes:
        print(f"{shape['M']}x{shape['N']}x{shape['K']} (torch {shape.get('torch_ms', math.nan) * 1e3:.1f} us)")
        for key in CONFIGS:
            ms = shape["configs"].get(key)
            i = table.index[key]
            measured = ms * 1e3 if ms else math.nan
            model, last_only = (models[v][shape["name"]][i] * 1e6 for v in (trips, 0.0))
            print(f"  {key:34s} measured {measured:7.1f}  model {model:7.1f}  (last slice only {last_only:7.1f})")


def sweeps(profile_path: str, paths: list[str]) -> None:
    raise SystemExit("splitk_count_in.py has no --sweeps mode")


if __name__ == "__main__":
    from harness import dispatch

    dispatch(run, summary, sweeps)
