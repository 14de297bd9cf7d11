"""Do HBM-bound weight streams read slower when each row of a tile is a short contiguous segment? (CPU)

A tile of B reads BLOCK_N rows of BLOCK_K elements (nt: B is K-major) or BLOCK_K rows of BLOCK_N (nn); each row is
one contiguous segment of 2 x that many bytes (bf16).  The model prices an HBM-bound stream by its bytes alone.
This reads committed sweeps' weight streams (M <= 16, 200 MB+, aligned, the best config at 3 TB/s or more) and, for
the configs the model calls HBM-bound with even waves (memory time over 1.05x the SM time, last wave full), sets
measured over predicted time (each relative to the shape's best) beside the segment length.  Nothing is fitted.

    PYTHONPATH=$PWD python3 experiments/segment_rates.py PROFILE RESULTS...

H200 seen sweeps (``profiles/nvidia-h200.h5``, the wide 855977 947201 363726 147226 711167 430594, random-dev, llm,
llm nt and decode nt sweeps): see experiments/README.md.
"""

from __future__ import annotations

import math
import statistics
import sys
from collections import defaultdict


def main(profile_path: str, paths: list[str]) -> None:
    from theodolite.kernels.config import GemmConfig, Problem
    from theodolite.model.predict import evaluate, table_for

    from theodolite.profile.hdf5 import load_profile
    from theodolite.results import load_results

    table = table_for(load_profile(profile_path), "bf16")
    rows: dict[tuple[str, int], list[tuple[float, float]]] = defaultdict(list)
    for path in paths:
        for shape in load_results(path).shapes:
            m, n, k, layout = shape.M, shape.N, shape.K, shape.layout
            if shape.dtype != "bf16" or m > 16 or shape.batch != 1 or k % 8 or (layout[1] == "n" and n % 8):
                continue
            timed = {key: ms for key, ms in shape.configs.items() if ms and math.isfinite(ms) and key in table.index}
            if not timed or n * k * 2 < 200e6:
                continue
            best = min(timed.values())
            if n * k * 2 / (best * 1e-3) < 3.0e12:
                continue
            times, terms = evaluate(table, Problem(m, n, k, layout=layout), detail=True)
            predicted_best = min(times[table.index[key]] for key in timed)
            for key, ms in timed.items():
                i = table.index[key]
                if terms["#last_wave_busy"][i] < 0.999 or terms["hbm_time"][i] < 1.05 * terms["sm_time"][i]:
                    continue
                config = GemmConfig.from_key(key)
                segment = 2 * (config.block_k if layout[1] == "t" else config.block_n)
                rows[(layout, segment)].append((ms / best, times[i] / predicted_best))
    print("layout  B row segment  configs  measured / best  model / best  measured / model (medians)")
    for (layout, segment), values in sorted(rows.items()):
        measured = statistics.median(v[0] for v in values)
        model = statistics.median(v[1] for v in values)
        ratio = statistics.median(v[0] / v[1] for v in values)
        print(f"{layout:6s}  {segment:5d} B        {len(values):7d}  {measured:15.3f}  {model:12.3f}  {ratio:17.3f}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
