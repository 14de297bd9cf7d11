"""Do element-wise operand loads gain from being issued one K step ahead into registers (``SYNC_PREFETCH``)?

Element-wise 2-byte loads cannot be ``cp.async`` copies, so Triton's pipeliner leaves them in the K loop and
every step waits their latency (README "Misaligned rows read with 4- or 8-byte vectors").  ``kernels.epilogue.
mma_tile`` can load such an operand's next tile before this step's dot instead (``THEODOLITE_SYNC_PREFETCH``,
read when a launch is planned).  Here the random-dev shapes whose kernels read an operand element-wise are timed
with the sweep's eight fastest configs both ways, side by side with torch.matmul (GPU time, graph-timed for small
inputs: ``Timer.interleaved``), and each (config, load class) is compiled both ways for its registers and spills.
Run on a GPU from the repository root (writes ``$OUT/sync-prefetch-<gpu>.json``), with the kernels of commit 2fd96eb
(the switch was reverted after this run: ``git checkout 2fd96eb -- kernels`` first):

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/sync_prefetch.py [shapes...]
"""

import math
import os
import sys

import torch
from harness import checked_runs, gpu_name, in_workers, rotated_inputs, write_rows
from theodolite.kernels.benchmark import Timer, make_inputs
from theodolite.kernels.config import ConfigError, GemmConfig, Problem, operand_loads
from theodolite.kernels.launch import plan_gemm

ENV = "THEODOLITE_SYNC_PREFETCH"
TOP = 8


def candidates(gpu: str, names: list[str]) -> list[tuple[str, int, int, int, str, list[str]]]:
    """(name, M, N, K, load class, the sweep's fastest configs) of the shapes read element-wise."""
    from theodolite.results import load_results

    out = []
    for s in load_results(f"reports/results/validate-random-dev-{gpu}.json").shapes:
        loads = operand_loads(Problem(s.M, s.N, s.K))
        if not loads.startswith("scalar") or (names and s.name not in names):
            continue
        timed = sorted((t, k) for k, t in s.configs.items() if t and not k.startswith("tma"))
        out.append((s.name, s.M, s.N, s.K, loads, [k for _, k in timed[:TOP]]))
    return out


def with_prefetch(on: bool) -> None:
    os.environ[ENV] = "1" if on else "0"


def warm(tasks: list[tuple[int, int, int, str, str, bool]]) -> list[tuple[str, str, bool, int, int]]:
    """Compile (run once) each task in this process; (config, loads, prefetch, registers, spills) per build."""
    from theodolite.kernels.build import compile_one

    device = torch.device("cuda")
    builds = {}
    for m, n, k, key, loads, on in tasks:
        with_prefetch(on)
        a, b = make_inputs(m, n, k, "bf16", "nn", device)
        try:
            plan_gemm(a, b, GemmConfig.from_key(key)).run()
        except ConfigError:
            continue
        if (key, loads, on) not in builds:
            build = compile_one(key, "bf16", loads=loads)
            builds[(key, loads, on)] = (build.n_regs, build.n_spills)
    torch.cuda.synchronize()
    return [(key, loads, on, regs, spills) for (key, loads, on), (regs, spills) in builds.items()]


def main() -> None:
    device = torch.device("cuda")
    gpu = gpu_name()
    shapes = candidates(gpu, sys.argv[1:])
    tasks = sorted({(m, n, k, key, loads, on) for _, m, n, k, loads, keys in shapes for key in keys
                    for on in (False, True)})  # fmt: skip
    builds = {(key, loads, on): (regs, spills) for share in in_workers(warm, tasks)
              for key, loads, on, regs, spills in share}  # fmt: skip
    print("compiled", len(builds), "builds", flush=True)
    timer = Timer()
    rows = []
    ratios = []
    for name, m, n, k, loads, keys in shapes:
        sets, calls, ref = rotated_inputs(m, n, k, timer, device)
        for on in (False, True):
            with_prefetch(on)
            for key in keys:
                runs = checked_runs(sets, key, ref, {})  # the switch is read as each launch is planned
                if runs is not None:
                    calls[f"{'on' if on else 'off'} {key}"] = runs
        labels = list(calls)
        times = dict(zip(labels, timer.interleaved([calls[c] for c in labels], keep=range(len(labels))), strict=True))
        for label, t in times.items():
            state, _, key = label.partition(" ")
            regs, spills = builds.get((key, loads, state == "on"), (None, None))
            rows.append({"shape": name, "M": m, "N": n, "K": k, "loads": loads, "config": key or "torch",
                         "prefetch": state if key else None, "us": t * 1e3, "regs": regs,
                         "spills": spills})  # fmt: skip
        best = {s: min((t for c, t in times.items() if c.startswith(s + " ")), default=math.inf) for s in ("off", "on")}
        ratios.append(best["off"] / best["on"])
        print(f"{name} {m}x{n}x{k} {loads}: torch {times['torch'] * 1e3:.1f} us, plain {best['off'] * 1e3:.1f} "
              f"(x{times['torch'] / best['off']:.2f} of torch), prefetch {best['on'] * 1e3:.1f} "
              f"(x{times['torch'] / best['on']:.2f}); plain/prefetch {best['off'] / best['on']:.3f}",
              flush=True)  # fmt: skip
    if ratios:
        geomean = math.exp(sum(map(math.log, ratios)) / len(ratios))
        print(f"geomean plain/prefetch over {len(ratios)} shapes: {geomean:.3f}")
    command = "PYTHONPATH=$PWD OUT=$OUT python3 experiments/sync_prefetch.py " + " ".join(sys.argv[1:])
    print("wrote", write_rows(f"sync-prefetch-{gpu}", command, rows), file=sys.stderr)


if __name__ == "__main__":
    main()
