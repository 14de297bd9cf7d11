"""How the Stream-K variant's time depends on how many K-slices its last wave's tiles are cut into.

The kernel's policy (``config.streamk_partition``) cuts each tile of the last partial wave into as many
aligned K-slices as the programs allow (at most 8, each >= 4 K-steps).  This forces every smaller split
too (1 = the tail runs data-parallel, one program per tile) and times them side by side with
torch.matmul, the way ``theodolite validate`` times a shape (CUDA-graph replays over rotated inputs when
they fit in L2, L2-flushed runs otherwise).  The model's prediction for each forced split is added
offline by ``--predict`` (no GPU), so the curve of measured against predicted can be compared.

On a GPU machine, from the repository root (writes ``$OUT/streamk-tail-split.json``, prints a table)::

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/streamk_tail_split.py

Then, on any machine::

    python3 experiments/streamk_tail_split.py --predict FILE.json --profile P.h5

``--fit-reduce-cost`` (with ``--predict``) calibrates ``model_streamk_reduce_cost``: what splitting changes,
measured (time at split s minus time at split 1) against predicted, over the aligned shapes (misaligned
ones carry the scalar-load path's own error into the unsplit time); it prints the RMS and the per-tile
median of that residual for a scan of values and the value of least RMS.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from typing import Any

# (M, N, K): Stream-K picks the model got wrong or shapes where a Stream-K config is the sweep's best
# (H100 results, 2026-11-23), and one synthetic shape whose tail is L2-bound in the model
SHAPES = [
    (1, 4096, 4096),
    (128, 4096, 4096),
    (512, 4096, 4096),
    (128, 6144, 4096),
    (128, 1280, 2944),
    (128, 5248, 1920),
    (3690, 92, 933),
    (3109, 121, 10157),
    (640, 896, 10240),
    (801, 241, 10321),
    (656, 45, 8053),
    (419, 40, 9016),
    (1442, 764, 4208),
]
CONFIGS = (
    "streamk/64x64x64/g8/w4/s4/k1",
    "streamk/64x128x64/g8/w4/s4/k1",
    "streamk/128x128x64/g8/w8/s4/k1",
    "streamk/128x256x64/g8/w8/s3/k1",
)
SPLITS = (1, 2, 3, 4, 5, 6, 8)


def _forced_plans(launch: Any, inputs: Any, config: Any, split: int) -> tuple[list[Any], int, float]:
    """Plans of every rotated input set with the tail forced to ``split`` K-slices; the split the plan
    really launches and the checked run's error (a NaN-poisoned output first)."""
    import torch
    from theodolite.kernels.benchmark import _max_rel_error

    def forced(tiles: int, programs: int, k_steps: int) -> tuple[int, int]:
        return tiles - tiles % programs, split

    original = launch.streamk_partition
    launch.streamk_partition = forced
    try:
        plans = [launch.plan_gemm(a, b, config, out=o) for a, b, _, o in inputs.sets]
    finally:
        launch.streamk_partition = original
    used = int(plans[0].steps[-1].kwargs.get("split", 1))  # split 1 runs the persistent kernel (no split argument)
    plans[0].run()
    inputs.sets[0][3].fill_(math.nan)
    plans[0].run()
    torch.cuda.synchronize()
    return plans, used, _max_rel_error(inputs.sets[0][3], inputs.ref)


def measure() -> dict[str, Any]:
    import torch
    from theodolite.kernels import launch
    from theodolite.kernels.benchmark import Timer, _shape_inputs
    from theodolite.kernels.config import TAIL_MIN_STEPS, GemmConfig, programs_per_sm, streamk_partition

    limits = launch.device_limits(torch.device("cuda"))
    timer = Timer()
    sms = limits.sm_count
    rows: list[dict[str, Any]] = []
    started = time.time()
    for index, (m, n, k) in enumerate(SHAPES):
        inputs = _shape_inputs(m, n, k, "bf16", "nn", timer, rotate=True)
        candidates: list[list[Any]] = [inputs.torch_fns]  # torch.matmul first, then every (config, split)
        meta: list[dict[str, Any]] = []
        for key in CONFIGS:
            config = GemmConfig.from_key(key)
            per_sm = programs_per_sm(config, "bf16", limits)
            programs = sms * per_sm
            tiles = -(-m // config.block_m) * -(-n // config.block_n)
            k_steps = -(-k // config.block_k)
            remainder = tiles % programs
            policy = streamk_partition(tiles, programs, k_steps)[1]
            if remainder == 0:
                continue
            for split in SPLITS:
                if remainder * split > programs or (split > 1 and k_steps // split < TAIL_MIN_STEPS):
                    continue
                try:
                    plans, used, error = _forced_plans(launch, inputs, config, split)
                except Exception as failure:  # a shape the kernel path does not take: say so, go on
                    print(f"{m}x{n}x{k} {key}@{split}: {type(failure).__name__}: {failure}", file=sys.stderr)
                    continue
                candidates.append([p.run for p in (plans if inputs.rotation else plans[:1])])
                meta.append({"config": key, "split": used, "policy_split": policy, "tiles": tiles,
                             "programs": programs, "k_steps": k_steps, "max_rel_error": error})  # fmt: skip
        if inputs.rotation:
            times = timer.interleaved(candidates, keep=[0])
        else:
            times = timer.flushed_interleaved([c[0] for c in candidates])
        torch_ms = times[0]
        for ms, info in zip(times[1:], meta, strict=True):
            rows.append({"M": m, "N": n, "K": k, **info, "ms": ms, "torch_ms": torch_ms})
        print(f"[{index + 1}/{len(SHAPES)}] {m}x{n}x{k}: {len(meta)} runs, {time.time() - started:.0f} s",
              file=sys.stderr, flush=True)  # fmt: skip
    return {"device": torch.cuda.get_device_name(0), "sms": sms, "torch": torch.__version__, "rows": rows}


def predict(path: str, profile_path: str) -> dict[str, Any]:
    """The model's time of each measured (shape, config, split): its tail split capped at the forced one."""
    from theodolite.kernels.config import GemmConfig, Problem
    from theodolite.model import core
    from theodolite.model import predict as model_predict

    from theodolite.profile.hdf5 import load_profile

    profile = load_profile(profile_path)
    with open(path) as f:
        data = json.load(f)
    keep = core.TAIL_MAX_SPLIT
    try:
        for row in data["rows"]:
            core.TAIL_MAX_SPLIT = row["split"]
            p = model_predict(Problem(row["M"], row["N"], row["K"]), GemmConfig.from_key(row["config"]), profile)
            row["predicted_ms"] = p.time_s * 1e3
            row["predicted_split"] = p.details["tail_split"]
    finally:
        core.TAIL_MAX_SPLIT = keep
    data["profile"] = profile_path
    return data


def split_residuals(data: dict[str, Any]) -> dict[str, list[float]]:
    """Per tile: (measured - predicted) change of time from split 1 to each split > 1, in us, aligned shapes."""
    from theodolite.kernels.config import Problem, needs_aligned_copy, operand_loads

    times: dict[tuple[int, int, int, str], dict[int, tuple[float, float]]] = {}
    for r in data["rows"]:
        problem = Problem(r["M"], r["N"], r["K"])
        if operand_loads(problem) != "vector" or any(needs_aligned_copy(problem)):
            continue
        times.setdefault((r["M"], r["N"], r["K"], r["config"]), {})[r["split"]] = (r["ms"], r["predicted_ms"])
    residuals: dict[str, list[float]] = {}
    for (_, _, _, config), by_split in times.items():
        if 1 not in by_split:
            continue
        m1, p1 = by_split[1]
        for split, (m, p) in by_split.items():
            if split > 1:
                residuals.setdefault(config.split("/")[1], []).append(1e3 * ((m - m1) - (p - p1)))
    return residuals


def fit_reduce_cost(path: str, profile_path: str, values: tuple[float, ...]) -> float:
    """Scan model_streamk_reduce_cost (Stream-K slowdown held at 1.0); print each value's residuals, return the best."""
    from theodolite.model.hardware import reset_parameters, set_parameters

    best = (math.inf, math.nan)
    try:
        for value in values:
            set_parameters(model_streamk_slowdown=1.0, model_streamk_reduce_cost=value)  # clears the tables
            residuals = split_residuals(predict(path, profile_path))
            flat = [x for xs in residuals.values() for x in xs]
            rms = math.sqrt(sum(x * x for x in flat) / len(flat))
            medians = " ".join(f"{tile} {sorted(xs)[len(xs) // 2]:+.2f}" for tile, xs in sorted(residuals.items()))
            print(f"reduce cost {value:4.2f}: RMS {rms:5.2f} us over {len(flat)} splits; median per tile (us): {medians}")
            best = min(best, (rms, value))
    finally:
        reset_parameters()
    print(f"least RMS: model_streamk_reduce_cost = {best[1]:.2f}")
    return best[1]


def table(data: dict[str, Any]) -> None:
    print(f"{'shape':>18} {'config':>32} {'split':>5} {'ms':>8} {'vs torch':>8} {'pred ms':>8}")
    for r in data["rows"]:
        pred = f"{r['predicted_ms']:.4f}" if "predicted_ms" in r else "-"
        mark = "*" if r["split"] == r["policy_split"] else " "
        print(f"{r['M']:>6}x{r['N']:>5}x{r['K']:>5} {r['config']:>32} {r['split']:>4}{mark} {r['ms']:.4f} "
              f"{r['torch_ms'] / r['ms']:>8.3f} {pred:>8}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--predict", metavar="JSON", help="add the model's predictions to a measured file")
    parser.add_argument("--profile", help="profile for --predict")
    parser.add_argument("-o", "--output", help="where to write (default: $OUT/streamk-tail-split.json or --predict)")
    parser.add_argument("--fit-reduce-cost", action="store_true", help="with --predict: calibrate the tail's cost")
    args = parser.parse_args()
    if args.fit_reduce_cost:
        if not (args.predict and args.profile):
            parser.error("--fit-reduce-cost needs --predict FILE and --profile P")
        fit_reduce_cost(args.predict, args.profile, tuple(1.0 + 0.25 * i for i in range(13)))
        return
    if args.predict:
        data = predict(args.predict, args.profile)
        output = args.output or args.predict
    else:
        data = measure()
        output = args.output or os.path.join(os.environ.get("OUT", "."), "streamk-tail-split.json")
    with open(output, "w") as f:
        json.dump(data, f, indent=1)
    table(data)


if __name__ == "__main__":
    main()
