"""Split-K's cooperative reduction (kept): its time against the last arriver's, and the sweeps brought up to date.

``kernels/splitk.py`` now reduces a deep split cooperatively where ``config.cooperative_reduction`` allows (at least
``COOP_MIN_SPLIT`` slices holding ``COOP_MIN_PARTIAL_BYTES`` of fp32 partials per tile, the grid one program per SM or
fewer): every slice waits for the tile's others and reduces its share of the row chunks, as a Stream-K tail does.  The
committed sweeps timed those configs with the last arriver's reduction.  For every shape of both suites, every config
of its sweep that now reduces cooperatively is timed both ways (``@last``: the rule switched off at planning), beside
the sweep's three fastest configs and torch.matmul, side by side as ``theodolite validate`` times a shape.  Run on a GPU
from the repository root (writes ``$OUT/coop-splitk-<gpu>.json``, prints a line per shape)::

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/coop_splitk.py

``--replace TIMES RESULTS`` (any machine) replaces those configs' times in a committed results file with the
cooperative times measured here, so that the file times the kernels as they now run (re-time its final round after)::

    python3 experiments/coop_splitk.py --replace coop-splitk-h100.json \\
        reports/results/validate-random-dev-h100.json
"""

import math
import sys

OFF = {"COOP_MIN_SPLIT": 10**9}  # harness.rule: plan with the last arriver's reduction
LAST = "@last"


def cooperative_keys(m: int, n: int, configs: dict[str, float | None], sm_count: int) -> list[str]:
    """The timed configs of a sweep's shape that now reduce cooperatively on a GPU of ``sm_count`` SMs."""
    from theodolite.kernels.config import GemmConfig, cooperative_reduction

    out = []
    for key, ms in configs.items():
        if ms and key.startswith("splitk/"):
            c = GemmConfig.from_key(key)
            if cooperative_reduction(c, math.ceil(m / c.block_m) * math.ceil(n / c.block_n), sm_count):
                out.append(key)
    return sorted(out)


def shapes(gpu: str, sm_count: int) -> list[tuple[str, int, int, int, list[str], list[str]]]:
    """(suite:name, M, N, K, the sweep's three fastest configs, its configs that now reduce cooperatively)."""
    from harness import sweep_shapes

    return sweep_shapes(gpu, ("random-dev", "llm"), lambda s: cooperative_keys(s.M, s.N, s.configs, sm_count))


def replace(times_path: str, results_path: str) -> None:
    """Replace the cooperative configs' times in a results file with this experiment's (``--replace``); no GPU."""
    import json
    import os

    from theodolite.results import load_results, save_results

    with open(times_path) as stream:
        data = json.load(stream)
    timed = {(r["M"], r["N"], r["K"], r["config"]): r["us"] * 1e-3 for r in data["rows"] if r.get("coop")}
    results = load_results(results_path)
    replaced = 0
    for shape in results.shapes:
        for key in list(shape.configs):
            ms = timed.get((shape.M, shape.N, shape.K, key))
            if ms is not None:
                shape.configs[key] = ms
                replaced += 1
    results.command += f" | coop_splitk.py --replace {os.path.basename(times_path)}"
    save_results(results, results_path)
    print(f"{results_path}: {replaced} config times replaced")


def main() -> None:
    if sys.argv[1:2] == ["--replace"]:
        replace(sys.argv[2], sys.argv[3])
        return
    import torch
    from harness import add_runs, gpu_name, in_workers, time_as_validate, validate_inputs, warm, write_rows
    from theodolite.kernels.benchmark import Timer

    gpu = gpu_name()
    sm_count = torch.cuda.get_device_properties(0).multi_processor_count
    todo = shapes(gpu, sm_count)
    tasks = sorted({(m, n, k, key, False) for _, m, n, k, best, coop in todo for key in set(best + coop)})
    print("warmed", sum(in_workers(warm, tasks)), "of", len(tasks), "shapes", len(todo), flush=True)
    timer = Timer()
    rows = []
    for name, m, n, k, best, coop in todo:
        inputs, sets, calls = validate_inputs(m, n, k, timer)
        ref = inputs.ref.float()
        add_runs(calls, sets, [c for c in best if c not in coop] + coop, ref)
        last: dict = {}
        add_runs(last, sets, coop, ref, OFF)
        calls.update({key + LAST: runs for key, runs in last.items()})
        times = time_as_validate(timer, inputs, calls)
        for c, t in times.items():
            key = c.removesuffix(LAST)
            rows.append({"shape": name, "M": m, "N": n, "K": k, "config": key, "us": t * 1e3,
                         "coop": key in coop and not c.endswith(LAST), "last": c.endswith(LAST), "sweep": key in best})  # fmt: skip
        pairs = [(times[c + LAST] / times[c], c) for c in coop if c in times and c + LAST in times]
        gain = " ".join(f"{c.split('/')[1]}/k{c.split('/k')[-1]} x{r:.3f}" for r, c in pairs)
        old = min(times[c + LAST] if c in coop and c + LAST in times else times[c] for c in best if c in times)
        new = min(times[c] for c in times if not c.endswith(LAST) and c != "torch")
        print(f"{name} {m}x{n}x{k}: torch {times['torch'] * 1e3:.2f} us, best before {old * 1e3:.2f} "
              f"(x{times['torch'] / old:.2f}), now {new * 1e3:.2f} (x{times['torch'] / new:.2f}); last/coop {gain}",
              flush=True)  # fmt: skip
    command = "PYTHONPATH=$PWD OUT=$OUT python3 experiments/coop_splitk.py"
    print("wrote", write_rows(f"coop-splitk-{gpu}", command, rows), file=sys.stderr)


if __name__ == "__main__":
    main()
