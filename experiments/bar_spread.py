"""How much does a shape's best-config-vs-torch.matmul ratio move between side-by-side rounds?

Issue 4's "no shape under 0.85x" is read off one final round per validation file; the shapes near the line (H100:
dev072 1536x512x640, dev044 128x1280x2944, dev124 768x3200x4224) read 0.83-0.87x from round to round.  This times, as
``validate`` times a shape, the sweep's three fastest configs beside torch.matmul ROUNDS times in a row (each round its
own interleaved timing on the same inputs) and prints each round's best / torch ratio, their median and spread.  Run
on a GPU from the repository root (``$OUT/bar-spread-<gpu>.json``)::

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/bar_spread.py [ROUNDS] [NAME ...]
"""

import statistics
import sys

from harness import add_runs, fastest, gpu_name, time_as_validate, validate_inputs, write_rows
from theodolite.kernels.benchmark import Timer

DEFAULT = ("dev072", "dev044", "dev124", "dev052")


def main() -> None:
    from theodolite.results import load_results

    args = sys.argv[1:]
    rounds = int(args.pop(0)) if args and args[0].isdigit() else 8
    names = args or list(DEFAULT)
    gpu = gpu_name()
    shapes = []
    for suite in ("llm", "random-dev"):
        shapes += [s for s in load_results(f"reports/results/validate-{suite}-{gpu}.json").shapes if s.name in names]
    timer = Timer()
    rows = []
    for s in shapes:
        best = fastest(s.configs, 3)
        inputs, sets, calls = validate_inputs(s.M, s.N, s.K, timer)
        add_runs(calls, sets, best, inputs.ref.float())
        ratios = []
        for r in range(rounds):
            times = time_as_validate(timer, inputs, calls)
            top = min(times[c] for c in best if c in times)
            ratios.append(times["torch"] / top)
            for c, t in times.items():
                rows.append({"shape": s.name, "M": s.M, "N": s.N, "K": s.K, "round": r, "config": c, "us": t * 1e3})
        spread = f"median {statistics.median(ratios):.3f}, min {min(ratios):.3f}, max {max(ratios):.3f}"
        each = " ".join(f"{x:.3f}" for x in ratios)
        print(f"{s.name} {s.M}x{s.N}x{s.K}: best / torch per round {each}; {spread}", flush=True)
    path = write_rows(f"bar-spread-{gpu}", "PYTHONPATH=$PWD OUT=$OUT python3 experiments/bar_spread.py "
                      + " ".join([str(rounds), *names]), rows)  # fmt: skip
    print("wrote", path, file=sys.stderr)


if __name__ == "__main__":
    main()
