"""The K-step against pipeline depth: persistent configs at 2-12 stages on shapes of one program per SM.

``deep_stages.py --steps`` found the model's K-step flat past 4-8 stages where the measurement keeps gaining (small-M
llm shapes), 12 stages slower than 8 on few-tile shapes, and a measured K-step under the model's busy floor.  This
times, side by side as ``theodolite validate`` times a shape (L2-flushed runs: every input here is over half of L2 or
timed as graph replays where it fits), persistent 64x64x64 at 2-12 stages, 64x64x128 at 2-6, 64x128x64 at 2-8 and
128x128x64 (8 warps) at 2-6, plus TMA 64x64x64 at 2-12, on M = 128 shapes whose 64x64 tiles number 8 to 256, with K
4096 and 16384 (one program per SM at any depth up to 128 tiles).  Run on a GPU from the repository root (writes
``$OUT/stage-series-<gpu>.json``)::

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/stage_series.py

``--model TIMES PROFILE`` (offline): the 64x64x64 series per K-step, measured beside the model's.
"""

import sys

SHAPES = [(128, n, k) for k in (4096, 16384) for n in (256, 1024, 2048, 4096, 8192)]
SERIES = (
    [f"persistent/64x64x64/g8/w4/s{s}/k1" for s in (2, 3, 4, 5, 6, 7, 8, 10, 12)]
    + [f"persistent/64x64x128/g8/w4/s{s}/k1" for s in (2, 3, 4, 5, 6)]
    + [f"persistent/64x128x64/g8/w4/s{s}/k1" for s in (2, 3, 4, 6, 8)]
    + [f"persistent/128x128x64/g8/w8/s{s}/k1" for s in (2, 3, 4, 5, 6)]
    + [f"tma/64x64x64/g8/w4/s{s}/k1" for s in (2, 3, 4, 6, 8, 12)]
)


def model_series(times_path: str, profile_path: str) -> None:
    """``--model TIMES PROFILE`` (offline): per K-step ns, measured / modelled (launch out), per config and shape."""
    import json
    import math

    from deep_stages import add_to_space
    from theodolite.kernels.config import Problem

    add_to_space(tuple(SERIES))
    from theodolite.model.predict import evaluate, table_for

    from theodolite.profile.hdf5 import load_profile

    table = table_for(load_profile(profile_path), "bf16")
    with open(times_path) as stream:
        rows = [r for r in json.load(stream)["rows"] if r["config"] in SERIES]
    for m, n, k in SHAPES:
        times, terms = evaluate(table, Problem(m, n, k), detail=True)
        line = []
        for row in rows:
            if (row["M"], row["N"], row["K"]) != (m, n, k) or not row["config"].startswith("persistent/64x64x64"):
                continue
            i = table.index[row["config"]]
            steps = math.ceil(k / table.configs[i].block_k)
            model = (times[i] - terms["launch"][i]) * 1e9 / steps
            line.append(f"s{table.configs[i].num_stages} {row['us'] * 1e3 / steps:.0f}/{model:.0f}")
        print(f"{m}x{n}x{k} 64x64x64 ns per K-step measured/modelled: {' '.join(line)}")


def main() -> None:
    if sys.argv[1:2] == ["--model"]:
        model_series(sys.argv[2], sys.argv[3])
        return
    import harness
    from harness import gpu_name, time_candidates

    harness.in_workers.__defaults__ = (8,)
    gpu = gpu_name()
    base = ["persistent/64x64x64/g8/w4/s4/k1"]
    todo = [(f"stages:{m}x{n}x{k}", m, n, k, base, [c for c in SERIES if c not in base]) for m, n, k in SHAPES]
    print("wrote", time_candidates(todo, "series", f"stage-series-{gpu}", "stage_series.py"), file=sys.stderr)


if __name__ == "__main__":
    main()
