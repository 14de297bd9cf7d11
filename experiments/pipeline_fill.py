"""What does a deeper pipeline cost one work item, and does the model's pipeline fill price it?

A pipelined K loop's prologue requests its (stages - 1) prefetched K-steps at once.  If those copies share the SM's
copy path, the first step's operands arrive only after all of them, so each stage costs an item about one K-step's
bytes at one SM's streaming ceiling, whatever the loop's length; the model before 2026-11-28 priced the opposite
(deeper pipelines only hide more latency).  This times one tile (one work item, the GPU otherwise idle) at 1 to ~40
K-steps through configs that differ only in their stages, pointer-based and TMA, and sets each stage's measured cost
beside the model's (``python -m theodolite bench --config``, bf16 nn, graph-timed).

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/pipeline_fill.py            # GPU: $OUT/pipeline-fill.json
    PYTHONPATH=$PWD python3 experiments/pipeline_fill.py --summary F.json PROFILE   # no GPU
    PYTHONPATH=$PWD python3 experiments/pipeline_fill.py --sweeps PROFILE RESULTS...  # no GPU: sweeps' one-tile shapes

H200 (`pipeline-fill-h200.json`, bundled profile): one more stage costs one tile +0.095 to +0.162 us (median over the
four K), pointer-based 64x64 and 64x128 and TMA 64x128 and 128x128 alike; the model before the pipeline fill priced
it -0.43 to +0.00 us (deeper pipelines hide more latency), with the fill -0.23 to +0.06.  On the seen sweeps' one-tile
shapes (``--sweeps profiles/nvidia-h200.h5 reports/results/validate-wide-{363726,147226}-h200.json.gz``) the same:
+0.08 to +0.17 us a stage measured.  Across all their shapes under 8 us the stages' residuals shrink (CHANGELOG).
A lone pointer-based 64x64x64 tile's long loop streams at 0.24 us a K-step against the 0.18 its stream ceiling allows,
so the model still prices its deep pipelines too fast (docs/model.md, known defects).
"""

from __future__ import annotations

import json
import math
import os
import statistics
from collections import defaultdict

# one tile of each config (M, N <= its tile), K of 1 to 41 K-steps of 64
SHAPES = [(f"k{k}", 64, 128, k) for k in (64, 768, 1536, 2624)]
FAMILIES = {
    "persistent/64x64x64/w4": ("persistent/64x64x64/g8/w4/s4/k1", "persistent/64x64x64/g8/w4/s8/k1",
                               "persistent/64x64x64/g8/w4/s12/k1"),
    "persistent/64x128x64/w4": ("persistent/64x128x64/g8/w4/s3/k1", "persistent/64x128x64/g8/w4/s4/k1",
                                "persistent/64x128x64/g8/w4/s8/k1"),
    "tma/64x128x64/w4": ("tma/64x128x64/g8/w4/s4/k1", "tma/64x128x64/g8/w4/s8/k1"),
    "tma/128x128x64/w8": ("tma/128x128x64/g8/w8/s3/k1", "tma/128x128x64/g8/w8/s4/k1", "tma/128x128x64/g8/w8/s6/k1"),
}  # fmt: skip


def family_of(key: str) -> str | None:
    for name, keys in FAMILIES.items():
        if key in keys:
            return name
    return None


def run(out: str) -> None:
    from harness import bench_configs

    keys = [key for keys in FAMILIES.values() for key in keys]
    bench_configs(SHAPES, keys, os.path.join(out, "pipeline-fill.json"), "bf16", "nn")


def _table(rows: dict[tuple[str, int], dict[str, tuple[float, float]]]) -> None:
    """rows[(family, k_steps)][key] = (measured us, predicted us): each family's stages side by side."""
    for (family, steps), by_key in sorted(rows.items()):
        keys = [k for k in FAMILIES[family] if k in by_key]
        cells = "  ".join(f"s{k.split('/')[4][1:]} {by_key[k][0]:6.2f} ({by_key[k][1]:6.2f})" for k in keys)
        print(f"{family:26s} {steps:3d} K-steps  measured (model)  {cells}")


def summary(path: str, profile_path: str) -> None:
    """The timings of a run beside the model's times for the same configs and shapes."""
    with open(path) as stream:
        shapes = json.load(stream)["shapes"]
    by_shape = {(s["M"], s["N"], s["K"]): s["configs"] for s in shapes}
    _compare(profile_path, [(m, n, k, "nn", cfgs) for (m, n, k), cfgs in by_shape.items()])


def sweeps(profile_path: str, paths: list[str]) -> None:
    """The one-tile shapes of validation sweeps (every family's tile covers M and N)."""
    from theodolite.results import load_results

    found = []
    for path in paths:
        for shape in load_results(path).shapes:
            if shape.M <= 64 and shape.N <= 128 and shape.batch == 1:
                found.append((shape.M, shape.N, shape.K, shape.layout, shape.configs))
    _compare(profile_path, found)


def _compare(profile_path: str, found: list[tuple[int, int, int, str, dict[str, float | None]]]) -> None:
    from theodolite.kernels.config import Problem
    from theodolite.model.predict import evaluate, table_for

    from theodolite.profile.hdf5 import load_profile

    table = table_for(load_profile(profile_path), "bf16")
    rows: dict[tuple[str, int], dict[str, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
    per_stage: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for m, n, k, layout, configs in found:
        times, _ = evaluate(table, Problem(m, n, k, layout=layout))
        steps = -(-k // 64)
        for key, ms in configs.items():
            family = family_of(key)
            if family is None or not ms or not math.isfinite(ms) or key not in table.index:
                continue
            rows[(family, steps)][key].append((ms * 1e3, float(times[table.index[key]]) * 1e6))
    merged = {fk: {key: tuple(statistics.median(v[i] for v in vals) for i in (0, 1)) for key, vals in d.items()}
              for fk, d in rows.items()}  # fmt: skip
    _table(merged)  # type: ignore[arg-type]
    for (family, _), by_key in merged.items():
        keys = [k for k in FAMILIES[family] if k in by_key]
        for a, b in zip(keys, keys[1:], strict=False):
            stages = int(b.split("/")[4][1:]) - int(a.split("/")[4][1:])
            per_stage[family].append(((by_key[b][0] - by_key[a][0]) / stages, (by_key[b][1] - by_key[a][1]) / stages))
    for family, pairs in sorted(per_stage.items()):
        measured = statistics.median(p[0] for p in pairs)
        model = statistics.median(p[1] for p in pairs)
        count = len(pairs)
        print(f"{family:26s} one more stage: measured {measured:+.3f} us, model {model:+.3f} us (median of {count})")


if __name__ == "__main__":
    from harness import dispatch

    dispatch(run, summary, sweeps)
