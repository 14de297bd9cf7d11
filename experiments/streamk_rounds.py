"""Stream-K: split more than the last partial wave, in rounds of whole tiles.

The policy (``config.streamk_partition``) runs the full waves data-parallel and cuts only the last partial wave's R
tiles into ``split`` aligned K-slices, as many as fit one program each (split <= P / R).  Where R is over half of the
P programs (llama3-8b.qkv 512x6144x4096: 96 tiles of 128x256 on 132 SMs) it cannot split at all and P - R SMs idle;
torch.matmul wins those shapes by 10-15%.  Letting the tail's slices run in several rounds removes the cap: with
``split`` dividing P, each round of P slices holds whole tiles, so the slices of a tile are resident together (the
kernel's spin-wait needs it) and walk K in lockstep (the textbook Stream-K's uneven shares, which do not, measured
1.6x slower per K-step).  96 tiles in 4 slices are 3 rounds of a quarter tile: 0.75 of the data-parallel wave, plus
three reductions.  Folding the last full wave into the split region as well (``fold`` 1) evens out other remainders.

The kernel needs no change: this forces ``streamk_partition`` to (data-parallel tiles, split) for each candidate and
times them beside the policy, the sweep's fastest configs and torch.matmul, as ``validate`` times a shape.  Run on a
GPU from the repository root (writes ``$OUT/streamk-rounds-<gpu>.json``)::

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/streamk_rounds.py
"""

import sys
from typing import Any

SHAPES = (
    ("llm", "llama3-8b.qkv", 512, 6144, 4096),
    ("llm", "llama3-8b.o", 512, 4096, 4096),
    ("llm", "llama3-70b.qkv", 512, 10240, 8192),
    ("llm", "llama3-8b.down", 512, 4096, 14336),
    ("llm", "llama3-8b.o", 128, 4096, 4096),
    ("llm", "llama3-70b-tp8.down", 128, 8192, 3584),
    ("random-dev", "dev124", 768, 3200, 4224),
    ("random-dev", "dev104", 256, 4352, 1664),
    ("random-dev", "dev100", 128, 5248, 1920),
)
CONFIGS = ("streamk/128x256x64/g8/w8/s3/k1", "streamk/128x128x64/g8/w8/s4/k1", "streamk/64x128x64/g8/w4/s4/k1")
SPLITS = (2, 3, 4, 6)
MIN_STEPS = 4  # a slice's fewest K-steps (the policy's TAIL_MIN_STEPS)


def candidates(tiles: int, programs: int, k_steps: int) -> list[tuple[int, int, int]]:
    """(fold, data-parallel tiles, split) to force: the tail (the last partial wave's tiles, plus ``fold`` full
    waves) in ``split`` slices over as many rounds as it takes, ``split`` dividing the program count."""
    remainder = tiles % programs
    out = []
    for fold in (0, 1):
        dp = tiles - remainder - fold * programs
        if dp < 0 or (fold and remainder == 0):
            continue
        for split in SPLITS:
            if programs % split == 0 and k_steps // split >= MIN_STEPS:
                out.append((fold, dp, split))
    return out


def main() -> None:
    import torch
    from harness import add_runs, fastest, first_right, gpu_name, time_as_validate, validate_inputs, write_rows
    from theodolite.kernels import launch
    from theodolite.kernels.benchmark import Timer
    from theodolite.kernels.config import GemmConfig, programs_per_sm, streamk_partition
    from theodolite.results import load_results

    gpu = gpu_name()
    limits = launch.device_limits(torch.device("cuda"))
    sweeps = {suite: {(s.name, s.M): s for s in load_results(f"reports/results/validate-{suite}-{gpu}.json").shapes}
              for suite in ("llm", "random-dev")}  # fmt: skip
    timer = Timer()
    rows: list[dict[str, Any]] = []
    for suite, name, m, n, k in SHAPES:
        inputs, sets, calls = validate_inputs(m, n, k, timer)
        ref = inputs.ref.float()
        best = fastest(sweeps[suite][(name, m)].configs, 2)
        add_runs(calls, sets, best + [c for c in CONFIGS if c not in best], ref)
        info: dict[str, dict[str, Any]] = {}
        for key in CONFIGS:
            config = GemmConfig.from_key(key)
            programs = limits.sm_count * programs_per_sm(config, "bf16", limits)
            tiles = -(-m // config.block_m) * -(-n // config.block_n)
            k_steps = -(-k // config.block_k)
            info[key] = {"policy": streamk_partition(tiles, programs, k_steps), "tiles": tiles, "programs": programs}
            for fold, dp, split in candidates(tiles, programs, k_steps):
                original = launch.streamk_partition
                launch.streamk_partition = lambda *_, dp=dp, split=split: (dp, split)
                try:
                    plans = [launch.plan_gemm(x, y, config, out=o) for x, y, o in sets]
                finally:
                    launch.streamk_partition = original
                if first_right(plans, sets[0][2], ref, name, key, fold, dp, split):
                    calls[f"{key}@f{fold}s{split}"] = [p.run for p in plans]
        torch.cuda.synchronize()
        times = time_as_validate(timer, inputs, calls)
        for c, t in times.items():
            key, _, forced = c.partition("@")
            extra: dict[str, Any] = info.get(key, {})
            rows.append({"shape": f"{suite}:{name}", "M": m, "N": n, "K": k, "config": key, "forced": forced or "-",
                         "us": t * 1e3, **{x: extra[x] for x in ("tiles", "programs") if x in extra},
                         "policy": list(extra["policy"]) if "policy" in extra else None})  # fmt: skip
        top = sorted((t, c) for c, t in times.items() if c != "torch")[:4]
        print(f"{name} {m}x{n}x{k}: torch {times['torch'] * 1e3:.2f} | best {best[0]} {times.get(best[0], 0) * 1e3:.2f} | "
              + " ".join(f"{c.split('/')[1]}{c.partition('@')[1] + c.partition('@')[2]}={t * 1e3:.2f}" for t, c in top)
              + " | policy " + " ".join(f"{c.split('/')[1]}={times[c] * 1e3:.2f}" for c in CONFIGS if c in times),
              flush=True)  # fmt: skip
    command = "PYTHONPATH=$PWD OUT=$OUT python3 experiments/streamk_rounds.py"
    print("wrote", write_rows(f"streamk-rounds-{gpu}", command, rows), file=sys.stderr)


if __name__ == "__main__":
    main()
