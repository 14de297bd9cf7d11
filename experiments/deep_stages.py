"""Deeper pipelines for the small-M llm shapes cuBLAS wins: do 6-16 stages pay?

``cublas_kernels.py`` read the kernels torch.matmul runs where our sweep best loses on the H100's llm shapes: for M <= 128
they are small tiles with deep pipelines (128x4096x4096: 64x64x64 in 13 stages; 64x4096x4096: 64x32x64 in 16;
128x8192x3584: 128x64x64 in 8), where our space stops at 4 stages.  For the llm shapes with M <= 512 whose sweep best
reads under 0.95x of torch.matmul, this times persistent, TMA and split-K configs with 5-16 stages (outside the space;
shared memory within the H100's 227 KB) beside the sweep's three fastest configs and torch.matmul, side by side as
``theodolite validate`` times a shape.  Run on a GPU from the repository root (writes ``$OUT/deep-stages-<gpu>.json``)::

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/deep_stages.py [--all]

``--all``: every llm shape with M <= 512 (``deep-stages-all-<gpu>.json``).  ``--model TIMES PROFILE`` (offline, no GPU):
the model's view of the same comparison with WINNERS added to the space.  ``--space SUITE`` (llm or random-dev): the
candidates for the space (SPACE) beside the sweep's three fastest on every shape of the committed sweep
(``deep-space-<suite>-<gpu>.json``), for ``harness.merge_times`` (seven of them were put in the space and taken out
again: CHANGELOG.md, 2026-11-27).  ``--steps GPU`` (offline): 64x64x64 at 4 / 8 / 12
stages on every shape whose 64x64 tiles fit one wave (one program per SM at any depth), measured (the committed sweep's
s4, the ``--space`` runs' s8 and s12) beside the model's times, with the per-K-step latency the s4 -> s12 gain implies
under the queueing form (K-step = latency / (stages - 1) + transfer).
"""

import sys

# (block_m, block_n, block_k, warps, stages) per variant; split-K also at 2 and 4 slices
TILES = ((64, 64, 64, 4, 8), (64, 64, 64, 4, 12), (64, 32, 64, 4, 12), (64, 32, 64, 4, 16), (128, 64, 64, 4, 8),
         (64, 128, 64, 4, 8), (64, 64, 128, 4, 6), (128, 128, 64, 8, 6))  # fmt: skip
SPLIT_TILES = ((16, 64, 128, 4, 8), (64, 64, 64, 4, 8), (64, 64, 64, 4, 12), (64, 32, 64, 4, 16))
EXTRA = [f"{v}/{bm}x{bn}x{bk}/g8/w{w}/s{s}/k1" for v in ("persistent", "tma") for bm, bn, bk, w, s in TILES] + [
    f"splitk/{bm}x{bn}x{bk}/g8/w{w}/s{s}/k{split}" for bm, bn, bk, w, s in SPLIT_TILES for split in (2, 4)
]
UNDER = 0.95  # sweep best / torch.matmul below this
MAX_M = 512


def shapes(gpu: str) -> list[tuple[str, int, int, int, list[str], list[str]]]:
    """(llm:name, M, N, K, the sweep's three fastest configs, the candidates) for the small-M shapes cuBLAS wins."""
    from harness import fastest

    from theodolite import validation
    from theodolite.results import load_results

    out = []
    for s in load_results(f"reports/results/validate-llm-{gpu}.json").shapes:
        summary = validation.shape_summary(s)
        if s.M <= MAX_M and (summary["best_vs_torch"] or 9.0) < UNDER:
            out.append((f"llm:{s.name}", s.M, s.N, s.K, fastest(s.configs, 3), EXTRA))
    return out


# the seven configs that won somewhere on the H100's llm shapes (deep-stages-all-h100.json)
WINNERS = ("persistent/64x64x64/g8/w4/s8/k1", "persistent/64x64x64/g8/w4/s12/k1", "persistent/64x128x64/g8/w4/s8/k1",
           "persistent/64x64x128/g8/w4/s6/k1", "persistent/128x128x64/g8/w8/s6/k1", "tma/64x128x64/g8/w4/s8/k1",
           "tma/128x128x64/g8/w8/s6/k1")  # fmt: skip


# the deep-pipeline configs timed for the space (2026-11-26, ``--space``): those that won an llm shape by 1% or
# more on either GPU in the ``--all`` runs, but split-K 64x64x64 s8 k2 (one H200 shape) and the TMA 64x64x64 ones
# (near ties of the persistent builds)
SPACE = ("persistent/64x64x64/g8/w4/s8/k1", "persistent/64x64x64/g8/w4/s12/k1", "persistent/64x128x64/g8/w4/s8/k1",
         "persistent/64x64x128/g8/w4/s6/k1", "persistent/128x64x64/g8/w4/s8/k1", "persistent/128x128x64/g8/w8/s6/k1",
         "tma/64x128x64/g8/w4/s8/k1", "tma/128x128x64/g8/w8/s6/k1", "tma/64x64x128/g8/w4/s6/k1",
         "tma/128x64x64/g8/w4/s8/k1")  # fmt: skip
# of those, the seven put in the space (and taken out again until the model ranks them): the other three
# (persistent 128x64x64 s8, TMA 64x64x128 s6 and 128x64x64 s8) were the fastest config of no shape by 2% or more in
# the four suites' sweeps with all ten merged (592 shape sweeps), and TMA 64x64x128 s6 was modelled a hair faster than
# the persistent builds where it ran 15% slower (H100 dev186)
LEFT_OUT = ("persistent/128x64x64/g8/w4/s8/k1", "tma/64x64x128/g8/w4/s6/k1", "tma/128x64x64/g8/w4/s8/k1")
KEPT = tuple(key for key in SPACE if key not in LEFT_OUT)


def suite_shapes(suite: str, gpu: str) -> list[tuple[str, int, int, int, list[str], list[str]]]:
    """Every shape of the committed ``suite`` sweep with its three fastest configs and SPACE."""
    from harness import sweep_shapes

    return sweep_shapes(gpu, (suite,), lambda s: list(SPACE))


def add_to_space(keys: tuple[str, ...]) -> None:
    """Put ``keys`` into the kernels' config space for this process (before any table is built); no compiler facts."""
    from theodolite.kernels import config as kernel_config
    from theodolite.kernels.config import GemmConfig

    space = kernel_config._space

    def with_keys(dtype: str, variant: str) -> tuple[GemmConfig, ...]:
        have = {c.key for c in space(dtype, variant)}
        extra = tuple(GemmConfig.from_key(key) for key in keys if key.startswith(variant + "/") and key not in have)
        return space(dtype, variant) + extra

    kernel_config._space = with_keys  # type: ignore[assignment]


def model_check(
    times_path: str, profile_path: str, candidates: tuple[str, ...] | None = None, label: str = "deep"
) -> None:
    """Offline, no GPU: the model's sweep-best / candidates'-best time ratio beside the measured one, per shape of a
    run, with ``candidates`` (WINNERS by default) added to the config space (no compiler facts for them: legality's
    estimates)."""
    import collections
    import json
    import math

    from theodolite.kernels.config import Problem

    candidates = WINNERS if candidates is None else candidates
    add_to_space(candidates)
    from theodolite.model.predict import evaluate, table_for

    from theodolite.profile.hdf5 import load_profile

    table = table_for(load_profile(profile_path), "bf16")
    measured: dict[tuple[int, int, int], dict[str, float]] = collections.defaultdict(dict)
    for row in json.load(open(times_path))["rows"]:
        measured[(row["M"], row["N"], row["K"])][row["config"]] = row["us"]
    agree = total = 0
    for (m, n, k), times in sorted(measured.items()):
        predicted, _ = evaluate(table, Problem(m, n, k))
        keys = [c for c in times if c in table.index and math.isfinite(predicted[table.index[c]])]
        sweep, deep = [c for c in keys if c not in candidates], [c for c in keys if c in candidates]
        if not sweep or not deep:
            continue
        gain = min(times[c] for c in sweep) / min(times[c] for c in deep)
        model = min(predicted[table.index[c]] for c in sweep) / min(predicted[table.index[c]] for c in deep)
        total += 1
        agree += (gain > 1) == (model > 1)
        print(f"{m}x{n}x{k}: sweep best / {label} best measured {gain:.3f}, model {model:.3f}")
    print(f"the model calls the faster of the two right on {agree} of {total} shapes")


def stage_series(gpu: str) -> None:
    """``--steps``: the 64x64x64 stage series per one-wave shape, measured and modelled (times in us, no launch)."""
    import json
    import math

    from theodolite.kernels.config import Problem
    from theodolite.model.predict import evaluate, table_for

    from theodolite.profile.hdf5 import load_profile
    from theodolite.results import load_results

    add_to_space(SPACE)
    profile = {"h100": "profiles/nvidia-h100-80gb-hbm3.h5", "h200": "profiles/nvidia-h200.h5"}[gpu]
    table = table_for(load_profile(profile), "bf16")
    keys = [f"persistent/64x64x64/g8/w4/s{s}/k1" for s in (4, 8, 12)]
    print("M x N x K          tiles steps | measured s4 s8 s12 | latency (us) | model s4 s8 s12")
    for suite in ("llm", "random-dev"):
        with open(f"experiments/deep-space-{suite}-{gpu}.json") as stream:
            deep = {(r["M"], r["N"], r["K"], r["config"]): r["us"] for r in json.load(stream)["rows"]}
        for shape in load_results(f"reports/results/validate-{suite}-{gpu}.json").shapes:
            m, n, k = shape.M, shape.N, shape.K
            tiles, steps = math.ceil(m / 64) * math.ceil(n / 64), math.ceil(k / 64)
            s4 = shape.configs.get(keys[0])
            measured = [s4 * 1e3 if s4 else None] + [deep.get((m, n, k, key)) for key in keys[1:]]
            if tiles > table.sm or None in measured or any(x % 8 for x in (m, n, k)):
                continue
            times, terms = evaluate(table, Problem(m, n, k), detail=True)
            model = [(times[table.index[c]] - terms["launch"][table.index[c]]) * 1e6 for c in keys]
            latency = (measured[0] - measured[2]) / (steps * (1 / 3 - 1 / 11))
            print(f"{m}x{n}x{k:<10} {tiles:5d} {steps:5d} | {measured[0]:6.1f} {measured[1]:6.1f} {measured[2]:6.1f} | "
                  f"{latency:6.3f} | {model[0]:6.1f} {model[1]:6.1f} {model[2]:6.1f}")  # fmt: skip


def main() -> None:
    if sys.argv[1:2] == ["--steps"]:
        stage_series(sys.argv[2])
        return
    if sys.argv[1:2] == ["--model"]:
        model_check(sys.argv[2], sys.argv[3])
        return
    from harness import gpu_name, time_candidates

    global UNDER
    gpu = gpu_name()
    if sys.argv[1:2] == ["--space"]:
        import harness

        harness.in_workers.__defaults__ = (6,)
        suite = sys.argv[2]
        todo = suite_shapes(suite, gpu)
        print("wrote", time_candidates(todo, "deep", f"deep-space-{suite}-{gpu}", f"deep_stages.py --space {suite}"),
              file=sys.stderr)  # fmt: skip
        return
    name = f"deep-stages-{gpu}"
    if sys.argv[1:2] == ["--all"]:  # every llm shape with M <= MAX_M, whatever its sweep best reads
        import harness

        UNDER, name = float("inf"), f"deep-stages-all-{gpu}"
        harness.in_workers.__defaults__ = (6,)  # fewer compiling workers: 14 ran out of memory on the vocabulary shapes
    print("wrote", time_candidates(shapes(gpu), "deep", name, "deep_stages.py"), file=sys.stderr)


if __name__ == "__main__":
    main()
