"""Do aligned copies pay on the small misaligned shapes the copy rule leaves uncopied (GPU time, graph-timed)?

``kernels.config.needs_aligned_copy`` copies a misaligned operand only in problems of at least
ALIGN_COPY_MIN_FLOPS (6e8) whose other dimension is at least ALIGN_COPY_MIN_REUSE (128): the threshold was set when
small shapes were timed with the host's launch cost in, where a copy's extra launch cost ~10 us.  The validation
harness now times small shapes as CUDA-graph replays (GPU time).  Here, every random-dev shape with a misaligned
operand the rule does not copy is timed both ways side by side with torch.matmul: uncopied, the sweep's five
fastest configs; copied (every misaligned operand, the copy's launch included), the model's six best predictions
for the copied problem.  Run on a GPU from the repository root (writes ``$OUT/small-copy-<gpu>.json``):

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/small_copy.py
"""

import math
import sys

import torch
from harness import COPY_ALL as ON
from harness import checked_runs, fastest, gpu_name, in_workers, rotated_inputs, rule, time_all, warm, write_rows
from theodolite.kernels.benchmark import Timer
from theodolite.kernels.config import Problem, needs_aligned_copy
from theodolite.kernels.launch import problem_of


def candidates(gpu: str) -> list[tuple[str, int, int, int, list[str], list[str]]]:
    """(name, M, N, K, uncopied configs, copied configs) of every shape the rule leaves with a misaligned operand."""
    from theodolite.model.predict import rank

    from theodolite.profile import load_profile
    from theodolite.results import load_results

    profile = load_profile({"h100": "profiles/nvidia-h100-80gb-hbm3.h5", "h200": "profiles/nvidia-h200.h5"}[gpu])
    out = []
    for s in load_results(f"reports/results/validate-random-dev-{gpu}.json").shapes:
        problem = Problem(s.M, s.N, s.K)
        copy_a, copy_b = needs_aligned_copy(problem)
        if not ((not problem.a_aligned and not copy_a) or (not problem.b_aligned and not copy_b)):
            continue
        with rule(ON):
            picks = [p.config.key for p in rank(problem, profile)[:6]]
        out.append((s.name, s.M, s.N, s.K, fastest(s.configs, 5), picks))
    return out


def main() -> None:
    device = torch.device("cuda")
    gpu = gpu_name()
    shapes = candidates(gpu)
    tasks = sorted({(m, n, k, key, copied) for _, m, n, k, off, on in shapes
                    for copied, keys in ((False, off), (True, on)) for key in keys})  # fmt: skip
    print("warmed", sum(in_workers(warm, tasks)), "of", len(tasks), flush=True)
    timer = Timer()
    rows = []
    for name, m, n, k, off, on in shapes:
        sets, calls, ref = rotated_inputs(m, n, k, timer, device)
        with rule(ON):
            on_copies = needs_aligned_copy(problem_of(*sets[0][:2]))
        for label, keys, settings in (("off", off, {}), ("on", on, ON)):
            for key in keys:
                runs = checked_runs(sets, key, ref, settings)
                if runs is not None:
                    calls[f"{label} {key}"] = runs
        times = time_all(timer, calls)
        for c, t in times.items():
            rows.append({"shape": name, "M": m, "N": n, "K": k, "config": c, "us": t * 1e3, "copies_on": on_copies})
        best_off = min((t for c, t in times.items() if c.startswith("off ")), default=math.inf)
        best_on = min((t for c, t in times.items() if c.startswith("on ")), default=math.inf)
        print(f"{name} {m}x{n}x{k} copies {on_copies}: torch {times['torch'] * 1e3:.1f} us, uncopied "
              f"{best_off * 1e3:.1f} (x{times['torch'] / best_off:.2f} of torch), copied {best_on * 1e3:.1f} "
              f"(x{times['torch'] / best_on:.2f})", flush=True)  # fmt: skip
    command = "PYTHONPATH=$PWD OUT=$OUT python3 experiments/small_copy.py"
    print("wrote", write_rows(f"small-copy-{gpu}", command, rows), file=sys.stderr)


if __name__ == "__main__":
    main()
