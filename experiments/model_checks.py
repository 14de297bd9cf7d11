"""CPU checks of the model against the committed sweeps, behind the figures of experiments/README.md's
entry "Model: TMA latency hiding fitted" (2026-11-23; no GPU):

    python3 experiments/model_checks.py exact
        the exact argmin (every legal config) scored on the four validate-*.json files (the fast path is what
        ``python -m theodolite.model.evaluate FILE --profile P`` scores)
    python3 experiments/model_checks.py tma-pairs h100|h200
        measured / predicted time of tma/X over persistent/X (same config) per tiles-per-SM band
    python3 experiments/model_checks.py tma-bounds h100|h200
        the same pairs' median measured / predicted ratio, grouped by what bounds the pointer config in the model
        (L2 time over its SM time) and by size (2026-11-27, "TMA's share of the L2")
    python3 experiments/model_checks.py splitk-pairs h100|h200
        split-K config minus the same tile's persistent config, measured minus predicted (us), per tile and split
    python3 experiments/model_checks.py fast-misses
        how often the fast path misses the exact argmin on 1200 random shapes (datasheet and measured H100)
    python3 experiments/model_checks.py scalar-steps h100|h200
        element-wise builds: time per K-step of one-wave split-K configs (the slope of time over K-steps per
        slice, same shape and tile, splits 2-16), measured over predicted per tile (2026-11-23)

Each takes ``model_param=value`` overrides after its arguments (the figures before a parameter changed: e.g.
``tma-pairs h100 model_tma_latency_hiding=1``); ``fast-misses TILE_SLACK=0`` sets a fast-path constant.
"""

import importlib
import math
import random
import sys
from collections import defaultdict

import numpy as np
from theodolite.kernels.config import GemmConfig, Problem, operand_loads
from theodolite.model import fast
from theodolite.model.hardware import set_parameters
from theodolite.model.predict import choose_index, clear_tables, evaluate, predict, table_for

from theodolite.profile import load_profile
from theodolite.profile.datasheet import h100_sxm
from theodolite.results import load_results

PROFILES = {"h100": "profiles/nvidia-h100-80gb-hbm3.h5", "h200": "profiles/nvidia-h200.h5"}
SUITES = ("llm", "random-dev")


def _results(gpu: str, suite: str):  # type: ignore[no-untyped-def]
    return load_results(f"reports/results/validate-{suite}-{gpu}.json")


def exact() -> None:
    """Selection efficiency of the exact argmin per file."""
    evaluate_module = importlib.import_module("theodolite.model.evaluate")
    for gpu, path in PROFILES.items():
        profile = load_profile(path)
        for suite in SUITES:
            clear_tables()
            s = evaluate_module.summarize(_results(gpu, suite), profile, {}, exact=True)
            below = sum(1 for x in s.shapes if x.efficiency < 0.9)
            print(f"{gpu} {suite:10s} geomean {s.geomean:.4f} p5 {s.p5:.3f} min {s.minimum:.3f} "
                  f"Spearman {s.spearman_median:.3f} below 0.9: {below}")  # fmt: skip


def tma_pairs(gpu: str) -> None:
    profile = load_profile(PROFILES[gpu])
    table = table_for(profile, "bf16")
    rows = []
    large: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for suite in SUITES:
        for shape in _results(gpu, suite).shapes:
            if shape.batch != 1:
                continue
            times, _ = evaluate(table, Problem(shape.M, shape.N, shape.K, dtype=shape.dtype, layout=shape.layout))
            for key, ms in shape.configs.items():
                partner = "persistent/" + key[4:]
                if not ms or not key.startswith("tma/") or not shape.configs.get(partner) or partner not in table.index:
                    continue
                bm, bn = (int(x) for x in key.split("/")[1].split("x")[:2])
                waves = math.ceil(shape.M / bm) * math.ceil(shape.N / bn) / table.sm
                predicted = times[table.index[key]] / times[table.index[partner]]
                rows.append((ms / shape.configs[partner], predicted, waves))
                if waves > 4.0:
                    large[key].append((ms / shape.configs[partner], predicted))
    data = np.array(rows)
    for lo, hi in ((0, 0.5), (0.5, 1.0), (1.0, 2.0), (2.0, 4.0), (4.0, math.inf)):
        band = (data[:, 2] > lo) & (data[:, 2] <= hi)
        if band.any():
            measured, predicted = np.exp(np.log(data[band, :2]).mean(axis=0))
            print(f"tiles per SM ({lo}, {hi}]: n={band.sum():4d} tma/persistent measured {measured:.3f} "
                  f"predicted {predicted:.3f}")  # fmt: skip
    for key, pairs in sorted(large.items()):
        measured, predicted = np.exp(np.log(np.array(pairs)).mean(axis=0))
        print(f"  over 4 tiles per SM, {key}: n={len(pairs)} measured {measured:.3f} predicted {predicted:.3f}")


def tma_bounds(gpu: str) -> None:
    """Median tma/X over persistent/X, measured and predicted, by the pointer config's model bound and size."""
    profile = load_profile(PROFILES[gpu])
    groups: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    for suite in SUITES:
        for shape in _results(gpu, suite).shapes:
            problem = Problem(shape.M, shape.N, shape.K, dtype=shape.dtype, layout=shape.layout)
            for key, ms in shape.configs.items():
                partner = "tma/" + key[len("persistent/"):]
                if not key.startswith("persistent/") or not ms or not shape.configs.get(partner):
                    continue
                pointer = predict(problem, GemmConfig.from_key(key), profile)
                tma = predict(problem, GemmConfig.from_key(partner), profile)
                share = pointer.breakdown["mem_time"] / pointer.breakdown["sm_time"]
                bound = "L2-bound" if share >= 0.97 else "L2 near SM" if share > 0.8 else "SM-bound"
                size = "small (< 15 us)" if ms < 0.015 else "larger"
                groups[(bound, size)].append((shape.configs[partner] / ms, tma.time_s / pointer.time_s))
    for (bound, size), pairs in sorted(groups.items()):
        measured, predicted = np.median(np.array(pairs), axis=0)
        print(f"{bound:10s} {size:15s} n={len(pairs):4d} tma/persistent measured {measured:.3f} predicted {predicted:.3f}")


def splitk_pairs(gpu: str) -> None:
    profile = load_profile(PROFILES[gpu])
    table = table_for(profile, "bf16")
    gaps: dict[tuple[str, int], list[float]] = defaultdict(list)
    for suite in SUITES:
        for shape in _results(gpu, suite).shapes:
            problem = Problem(shape.M, shape.N, shape.K)
            if operand_loads(problem) != "vector":
                continue
            times, _ = evaluate(table, problem)
            for key, ms in shape.configs.items():
                if not ms or not key.startswith("splitk/") or key not in table.index:
                    continue
                tile = key.split("/")[1]
                partners = [f"persistent/{tile}/g8/w{w}/s{s}/k1{f}" for w, s, f in
                            ((4, 4, ""), (4, 4, "/f"), (8, 4, "/f"), (8, 3, "/f"))]  # fmt: skip
                base = next((p for p in partners if shape.configs.get(p) and p in table.index), None)
                if base is None:
                    continue
                measured = (ms - shape.configs[base]) * 1e3
                predicted = (times[table.index[key]] - times[table.index[base]]) * 1e6
                gaps[(tile, int(key.split("/k")[-1]))].append(measured - predicted)
    for (tile, split), values in sorted(gaps.items()):
        print(f"{tile:10s} k{split:<2d} n={len(values):3d} measured - predicted, median {np.median(values):+.2f} us")


def scalar_steps(gpu: str) -> None:
    """A one-wave split-K config's time grows with its K-steps per slice by one program's K-step (every slice runs
    at once): the slope over the splits of one shape and tile, measured against the model's."""
    profile = load_profile(PROFILES[gpu])
    table = table_for(profile, "bf16")
    ratios: dict[str, list[float]] = defaultdict(list)
    for suite in SUITES:
        for shape in _results(gpu, suite).shapes:
            problem = Problem(shape.M, shape.N, shape.K)
            if not operand_loads(problem).startswith("scalar"):
                continue
            times, terms = evaluate(table, problem, detail=True)
            points: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
            for key, ms in shape.configs.items():
                i = table.index.get(key)
                if not ms or not key.startswith("splitk/") or i is None or terms["#items"][i] > terms["#concurrent"][i]:
                    continue
                points[key.split("/")[1]].append((float(terms["#iterations"][i]), ms * 1e-3, float(times[i])))
            for tile, pts in points.items():
                steps = np.array([p[0] for p in pts])
                if len(pts) < 2 or steps.max() == steps.min():
                    continue
                measured = np.polyfit(steps, [p[1] for p in pts], 1)[0]
                predicted = np.polyfit(steps, [p[2] for p in pts], 1)[0]
                if predicted > 0:
                    ratios[tile].append(measured / predicted)
    for tile, values in sorted(ratios.items()):
        print(f"{tile:10s} n={len(values):3d} per K-step measured / predicted, median {np.median(values):.2f} "
              f"(p25 {np.percentile(values, 25):.2f}, p75 {np.percentile(values, 75):.2f})")


def fast_misses() -> None:
    rng = random.Random(2)
    shapes = [tuple(int(math.exp(rng.uniform(0, math.log(20000)))) for _ in range(3)) for _ in range(600)]
    for name, profile in (("datasheet", h100_sxm()), ("measured", load_profile(PROFILES["h100"]))):
        table = table_for(profile, "bf16")
        worse = []
        for m, n, k in shapes:
            for layout in ("nn", "nt"):
                problem = Problem(m, n, k, layout=layout)
                i_fast, t_fast = fast.choose_fast(table, problem)
                i_full, times = choose_index(table, problem)
                if i_fast != i_full:
                    worse.append(float(times[i_full]) / t_fast)
        print(f"{name} H100 (TILE_SLACK {fast.TILE_SLACK}): {len(worse)} misses of 1200, worst "
              f"{min(worse, default=1.0):.3f} of the fast pick's predicted time")  # fmt: skip


if __name__ == "__main__":
    words = sys.argv[1:] or ["exact"]
    overrides = {k: float(v) for k, v in (w.split("=") for w in words if "=" in w)}
    for name in [k for k in overrides if k.isupper()]:  # the fast path's constants (TILE_SLACK=0: before it)
        setattr(fast, name, type(getattr(fast, name))(overrides.pop(name)))
    if overrides:
        set_parameters(**overrides)
    command, *rest = [w for w in words if "=" not in w]
    if command == "exact":
        exact()
    elif command == "tma-pairs":
        tma_pairs(rest[0])
    elif command == "tma-bounds":
        tma_bounds(rest[0])
    elif command == "splitk-pairs":
        splitk_pairs(rest[0])
    elif command == "scalar-steps":
        scalar_steps(rest[0])
    elif command == "fast-misses":
        fast_misses()
    else:
        sys.exit(__doc__)
