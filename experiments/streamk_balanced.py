"""Stream-K's last partial wave: aligned equal K-slices (the kernel's policy) against the tail's K-steps shared out
evenly over every program (``streamk_balanced_kernel``).

The policy cuts each of the R tiles of the last partial wave into ``floor(P / R)`` aligned slices (P programs), so
when P / R is below 2 the tail runs data-parallel and P - R programs idle: 96 tiles of 128x256 on 132 SMs keep 36
SMs idle for the whole kernel.  The balanced tail gives each program ``R x K-steps / P`` K-steps (every program
busy; a tile in 2-3 pieces whose fp32 partials the last to finish adds).  For each shape and Stream-K config whose
last wave is partial this times the policy's tail, the balanced tail, the committed sweep's three fastest configs
of the shape (any variant) and torch.matmul side by side, the way ``theodolite validate`` times a shape (CUDA-graph
replays over inputs rotated through L2 when they fit, L2-flushed runs otherwise).

The balanced kernel was reverted after this measurement: check out commit 22c383a's ``kernels/`` to run it again.
On a GPU machine, from the repository root (writes ``$OUT/streamk-balanced-GPU.json``, prints a table)::

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/streamk_balanced.py
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from typing import Any

from harness import gpu_name, in_workers

# (name, M, N, K): llm and random-dev shapes whose sweep best loses to torch.matmul and whose large tiles leave
# SMs idle in a partial last wave (H100 sweeps of 2026-11-23), and a few whose policy already splits the tail
SHAPES = [
    ("llama3-70b.qkv", 512, 10240, 8192),
    ("llama3-8b.qkv", 512, 6144, 4096),
    ("llama3-8b.o", 512, 4096, 4096),
    ("llama3-8b.down", 512, 4096, 14336),
    ("llama3-8b.gate_up", 512, 28672, 4096),
    ("llama3-8b.o", 128, 4096, 4096),
    ("llama3-8b.qkv", 128, 6144, 4096),
    ("llama3-70b-tp8.down", 128, 8192, 3584),
    ("llama3-70b-tp8.gate_up", 128, 7168, 8192),
    ("llama3-70b.qkv", 128, 10240, 8192),
    ("llama3-70b.o", 128, 8192, 8192),
    ("llama3-8b.o", 64, 4096, 4096),
    ("llama3-8b.o", 2048, 4096, 4096),
    ("llama3-70b-tp8.gate_up", 512, 7168, 8192),
    ("dev124", 768, 3200, 4224),
    ("dev137", 194, 7828, 1362),
    ("dev104", 256, 4352, 1664),
    ("dev072", 1536, 512, 640),
    ("dev100", 128, 5248, 1920),
    ("dev132", 640, 896, 10240),
    ("dev052", 2048, 128, 1664),
    ("dev044", 128, 1280, 2944),
    ("dev012", 640, 3072, 9088),
    ("dev004", 512, 10752, 2048),
    ("dev076", 256, 256, 8448),
    ("dev048", 128, 768, 11520),
]
CONFIGS = (
    "streamk/64x64x64/g8/w4/s4/k1",
    "streamk/64x128x64/g8/w4/s4/k1",
    "streamk/128x64x64/g8/w4/s4/k1",
    "streamk/128x128x64/g8/w4/s4/k1",
    "streamk/128x128x64/g8/w8/s4/k1",
    "streamk/128x256x64/g8/w8/s3/k1",
)


def _sweep_best(gpu: str) -> dict[tuple[int, int, int], list[str]]:
    """The committed sweep's three fastest configs per shape."""
    best: dict[tuple[int, int, int], list[str]] = {}
    for suite in ("llm", "random-dev"):
        with open(f"reports/results/validate-{suite}-{gpu}.json") as f:
            for shape in json.load(f)["shapes"]:
                timed = {k: v for k, v in shape["configs"].items() if v}
                best[(shape["M"], shape["N"], shape["K"])] = sorted(timed, key=lambda key: timed[key])[:3]
    return best


def _balanced(tiles: int, programs: int, k_steps: int) -> tuple[int, int]:
    return tiles - tiles % programs, 0


def _plans(key: str, sets: list[Any], balanced: bool) -> list[Any]:
    from theodolite.kernels import launch
    from theodolite.kernels.config import GemmConfig

    original = launch.streamk_partition
    if balanced:
        launch.streamk_partition = _balanced
    try:
        return [launch.plan_gemm(a, b, GemmConfig.from_key(key), out=o) for a, b, _, o in sets]
    finally:
        launch.streamk_partition = original


def _compile(tasks: list[tuple[int, int, int, str, bool]]) -> int:
    """Compile (run once on small random inputs of each shape) in a worker, filling the Triton cache."""
    import torch

    done = 0
    for m, n, k, key, balanced in tasks:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        _plans(key, [(a, b, None, out)], balanced)[0].run()
        done += 1
    torch.cuda.synchronize()
    return done


def measure() -> dict[str, Any]:
    import torch
    from theodolite.kernels import launch
    from theodolite.kernels.benchmark import Timer, _max_rel_error, _shape_inputs
    from theodolite.kernels.config import GemmConfig, programs_per_sm, streamk_partition

    gpu = gpu_name()
    limits = launch.device_limits(torch.device("cuda"))
    sms = limits.sm_count
    best = _sweep_best(gpu)
    work: list[tuple[str, int, int, int, str, int, int, int, int]] = []
    for name, m, n, k in SHAPES:
        for key in CONFIGS:
            config = GemmConfig.from_key(key)
            programs = sms * programs_per_sm(config, "bf16", limits)
            tiles = -(-m // config.block_m) * -(-n // config.block_n)
            k_steps = -(-k // config.block_k)
            remainder = tiles % programs
            if remainder and remainder * k_steps >= programs:
                work.append((name, m, n, k, key, programs, tiles, k_steps, streamk_partition(tiles, programs, k_steps)[1]))
    started = time.time()
    tasks = [(m, n, k, key, balanced) for _, m, n, k, key, *_ in work for balanced in (False, True)]
    tasks += [(m, n, k, key, False) for _, m, n, k in SHAPES for key in best.get((m, n, k), [])]
    in_workers(_compile, tasks, workers=14)
    print(f"compiled {len(tasks)} launches in {time.time() - started:.0f} s", file=sys.stderr, flush=True)
    timer = Timer()
    rows: list[dict[str, Any]] = []
    for index, (name, m, n, k) in enumerate(SHAPES):
        inputs = _shape_inputs(m, n, k, "bf16", "nn", timer, rotate=True)
        candidates: list[list[Any]] = [inputs.torch_fns]
        meta: list[dict[str, Any]] = []

        def add(key: str, balanced: bool, info: dict[str, Any]) -> None:
            plans = _plans(key, inputs.sets, balanced)
            inputs.sets[0][3].fill_(math.nan)
            plans[0].run()
            torch.cuda.synchronize()
            candidates.append([p.run for p in (plans if inputs.rotation else plans[:1])])
            meta.append({**info, "config": key, "balanced": balanced,
                         "max_rel_error": _max_rel_error(inputs.sets[0][3], inputs.ref)})  # fmt: skip

        for key in best.get((m, n, k), []):
            add(key, False, {"role": "sweep best"})
        for _, wm, wn, wk, key, programs, tiles, k_steps, policy in work:
            if (wm, wn, wk) != (m, n, k):
                continue
            info = {"programs": programs, "tiles": tiles, "k_steps": k_steps, "policy_split": policy}
            add(key, False, {**info, "role": "policy"})
            add(key, True, {**info, "role": "balanced"})
        times = timer.interleaved(candidates, keep=[0]) if inputs.rotation else timer.flushed_interleaved(
            [c[0] for c in candidates])  # fmt: skip
        for ms, info in zip(times[1:], meta, strict=True):
            rows.append({"name": name, "M": m, "N": n, "K": k, **info, "ms": ms, "torch_ms": times[0]})
        print(f"[{index + 1}/{len(SHAPES)}] {name} {m}x{n}x{k}: {len(meta)} runs, {time.time() - started:.0f} s",
              file=sys.stderr, flush=True)  # fmt: skip
    return {"device": torch.cuda.get_device_name(0), "sms": sms, "torch": torch.__version__,
            "command": "PYTHONPATH=$PWD OUT=$OUT python3 experiments/streamk_balanced.py",
            "rows": rows}  # fmt: skip


def table(data: dict[str, Any]) -> None:
    print(f"{'shape':>22} {'config':>32} {'role':>10} {'split':>5} {'ms':>8} {'vs torch':>8} {'err':>8}")
    for r in data["rows"]:
        split = r.get("policy_split", "")
        print(f"{r['M']:>6}x{r['N']:>5}x{r['K']:>5} {r['config']:>32} {r['role']:>10} {split!s:>5} {r['ms']:.4f} "
              f"{r['torch_ms'] / r['ms']:>8.3f} {r['max_rel_error']:.1e}")  # fmt: skip
    by_shape: dict[tuple[int, int, int], dict[str, float]] = {}
    for r in data["rows"]:
        best = by_shape.setdefault((r["M"], r["N"], r["K"]), {"torch": r["torch_ms"]})
        role = "balanced" if r["balanced"] else "other"
        best[role] = min(best.get(role, math.inf), r["ms"])
    ratios = [(v["other"] / v["balanced"], v["torch"] / min(v["other"], v.get("balanced", math.inf)),
               v["torch"] / v["other"]) for v in by_shape.values() if "balanced" in v]  # fmt: skip
    if ratios:
        gm = [math.exp(sum(math.log(r[i]) for r in ratios) / len(ratios)) for i in range(3)]
        print(f"{len(ratios)} shapes: best without balanced / best balanced geomean {gm[0]:.3f}; vs torch "
              f"{gm[2]:.3f} -> {gm[1]:.3f}")  # fmt: skip


def main() -> None:
    data = measure()
    path = os.path.join(os.environ.get("OUT", "."), f"streamk-balanced-{gpu_name()}.json")
    with open(path, "w") as f:
        json.dump(data, f, indent=1)
    table(data)


if __name__ == "__main__":
    main()
