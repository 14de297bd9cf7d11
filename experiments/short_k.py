"""Short K: would tiles with BLOCK_K 32 or 16 help the random-dev shapes whose whole K fits one 64-deep K-step?

Every config of the declared space reads K in steps of at least 64 elements (bf16); a shape with K = 18 then issues
3.5x the loads it needs (the rows past K are masked, not skipped), and with misaligned rows those loads are
element-wise.  The large-output short-K shapes are where the sweep's best loses most to torch.matmul (H100
random-dev: dev033 1437x2222x18 0.50x, dev105 332x12914x36 0.70x, dev078 465x1332x23 0.72x, dev135 2051x2319x38
0.74x, dev061 2873x1370x19 0.77x).  For every random-dev shape with K < 100 this times, side by side with
torch.matmul as ``theodolite validate`` does (CUDA-graph replays over inputs rotated through L2), the sweep's four
fastest configs and persistent configs outside the space with BLOCK_K 32 and 16.  Run on a GPU from the repository
root (writes ``$OUT/short-k-<gpu>.json``)::

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/short_k.py

``--llm`` (after the short-K configs joined the space) times the six kept ones beside the committed sweep's fastest
config on every llm shape (writes ``$OUT/short-k-llm-<gpu>.json``), for the llm results files: there, every K is
3584 or more.  On any machine, ``--merge TIMES RESULTS`` then adds those six configs' times (ms, as measured there)
to the shapes of a committed llm results file that lack them, so it again holds every config of the space:

    python3 experiments/short_k.py --merge short-k-llm-h100.json reports/results/validate-llm-h100.json
"""

import sys

import torch
from harness import add_runs, fastest, gpu_name, in_workers, merge_times, rotated_inputs, time_all, warm
from harness import write_rows
from theodolite.kernels.benchmark import Timer

# (block_m, block_n, warps, stages) of the candidates, each with BLOCK_K 32 and 16
TILES = ((128, 128, 8, 2), (128, 256, 8, 2), (256, 128, 8, 2), (64, 256, 8, 2), (64, 128, 4, 2), (128, 64, 4, 2),
         (64, 64, 4, 2), (128, 32, 4, 2), (16, 64, 4, 2))  # fmt: skip
EXTRA = [f"persistent/{bm}x{bn}x{bk}/g8/w{w}/s{s}/k1" for bm, bn, w, s in TILES for bk in (32, 16)]


def shapes(gpu: str) -> list[tuple[str, int, int, int, list[str]]]:
    """(name, M, N, K, the sweep's four fastest configs) of every random-dev shape with K < 100."""
    from theodolite.results import load_results

    out = []
    for s in load_results(f"reports/results/validate-random-dev-{gpu}.json").shapes:
        if s.K < 100:
            out.append((s.name, s.M, s.N, s.K, fastest(s.configs, 4)))
    return out


KEPT = [f"persistent/{tile}/g8/w{w}/s2/k1" for tile, w in (("16x64x32", 4), ("16x64x16", 4), ("64x64x32", 4),
                                                           ("64x64x16", 4), ("128x64x16", 4), ("256x128x16", 8))]  # fmt: skip


def llm_shapes(gpu: str) -> list[tuple[str, int, int, int, list[str]]]:
    """(name, M, N, K, the sweep's fastest config) of every llm shape."""
    from theodolite.results import load_results

    return [
        (s.name, s.M, s.N, s.K, fastest(s.configs, 1))
        for s in load_results(f"reports/results/validate-llm-{gpu}.json").shapes
    ]


def merge(times_path: str, results_path: str) -> None:
    """Add the timed short-K configs to the llm results file's shapes (``--merge``); no GPU."""
    added, closest = merge_times(times_path, results_path, KEPT, "short_k.py")
    print(f"{results_path}: {added} config times added; the closest to its shape's sweep best runs at {closest:.2f}x "
          "its speed")  # fmt: skip


def main() -> None:
    if sys.argv[1:2] == ["--merge"]:
        merge(sys.argv[2], sys.argv[3])
        return
    device = torch.device("cuda")
    gpu = gpu_name()
    llm = "--llm" in sys.argv
    todo = llm_shapes(gpu) if llm else shapes(gpu)
    extra = KEPT if llm else EXTRA
    # llm shapes are aligned: a binary compiled on a smaller aligned shape serves them (14 workers at full size OOM)
    cap = 512 if llm else 1 << 30
    tasks = sorted({(min(m, cap), min(n, cap), min(k, cap), key, False) for _, m, n, k, best in todo
                    for key in best + extra})  # fmt: skip
    print("warmed", sum(in_workers(warm, tasks)), "of", len(tasks), flush=True)
    timer = Timer()
    rows = []
    for name, m, n, k, best in todo:
        sets, calls, ref = rotated_inputs(m, n, k, timer, device)
        add_runs(calls, sets, best + extra, ref)
        times = time_all(timer, calls)
        for c, t in times.items():
            rows.append({"shape": name, "M": m, "N": n, "K": k, "config": c, "us": t * 1e3, "sweep": c in best})
        old = min(times[c] for c in best if c in times)
        new = min((times[c] for c in extra if c in times), default=float("inf"))
        top = min(((times[c], c) for c in extra if c in times), default=(0.0, "-"))[1]
        print(f"{name} {m}x{n}x{k}: torch {times['torch'] * 1e3:.2f} us, sweep best {old * 1e3:.2f} "
              f"(x{times['torch'] / old:.2f}), short-K best {new * 1e3:.2f} (x{times['torch'] / new:.2f}) {top}",
              flush=True)  # fmt: skip
    command = "PYTHONPATH=$PWD OUT=$OUT python3 experiments/short_k.py" + (" --llm" if llm else "")
    print("wrote", write_rows(f"short-k{'-llm' if llm else ''}-{gpu}", command, rows), file=sys.stderr)


if __name__ == "__main__":
    main()
