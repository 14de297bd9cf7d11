"""Small-M (decode) shapes: do deeper pipelines or longer K-steps read B faster than the space's small tiles?

With M <= 128 an llm GEMM reads B once (tens of MB to 1 GB) and little else, so its floor is B at the HBM read rate;
the sweep's best (and torch.matmul) reach about half of it on the H100 (llama3-8b.o 1x4096x4096: 21.8 / 20.4 us for
32 MB).  For every llm shape with M <= 128 this times, side by side with torch.matmul as ``theodolite validate`` does
(graph replays over rotated inputs when they fit in L2, L2-flushed runs otherwise), the sweep's three fastest configs,
configs outside the space with more bytes in flight per SM (more stages, 256-deep K-steps), and a read of B alone
(``torch.sum`` over a copy of B's size: what the HBM gives one pass).  Run on a GPU from the repository root (writes
``$OUT/decode-tiles-<gpu>.json``)::

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/decode_tiles.py
"""

import sys

import torch
from harness import add_runs, fastest, gpu_name, in_workers, time_as_validate, validate_inputs, warm, write_rows
from theodolite.kernels.benchmark import Timer

EXTRA = [
    "persistent/16x64x128/g8/w4/s6/k1",
    "persistent/16x64x128/g8/w4/s8/k1",
    "persistent/16x64x256/g8/w4/s3/k1",
    "persistent/16x64x256/g8/w4/s4/k1",
    "persistent/16x128x128/g8/w4/s6/k1",
    "persistent/16x128x256/g8/w4/s3/k1",
    "persistent/16x256x128/g8/w8/s4/k1",
    "persistent/32x128x128/g8/w4/s4/k1",
    "persistent/64x128x128/g8/w4/s4/k1",
    "splitk/16x64x256/g8/w4/s4/k2",
    "splitk/16x64x128/g8/w4/s6/k2",
    "splitk/16x128x128/g8/w4/s4/k2",
    "splitk/64x128x128/g8/w4/s4/k2",
]


def shapes(gpu: str) -> list[tuple[str, int, int, int, list[str]]]:
    from theodolite.results import load_results

    out = []
    for s in load_results(f"reports/results/validate-llm-{gpu}.json").shapes:
        if s.M <= 128:
            out.append((s.name, s.M, s.N, s.K, fastest(s.configs, 3)))
    return out


def main() -> None:
    gpu = gpu_name()
    todo = shapes(gpu)
    tasks = sorted({(m, min(n, 1024), min(k, 1024), key, False) for _, m, n, k, best in todo for key in best + EXTRA})
    print("warmed", sum(in_workers(warm, tasks)), "of", len(tasks), flush=True)
    timer = Timer()
    rows = []
    for name, m, n, k, best in todo:
        inputs, sets, calls = validate_inputs(m, n, k, timer)
        reads = [torch.randn_like(b) for _, b, _ in sets]  # as many copies as the GEMM rotates through
        calls["read B"] = [lambda x=x: torch.sum(x) for x in reads]
        add_runs(calls, sets, best + EXTRA, inputs.ref.float())
        times = time_as_validate(timer, inputs, calls)
        for c, t in times.items():
            rows.append({"shape": name, "M": m, "N": n, "K": k, "config": c, "us": t * 1e3, "sweep": c in best})
        old = min(times[c] for c in best if c in times)
        new_key = min(((times[c], c) for c in EXTRA if c in times), default=(float("inf"), "-"))
        gbs = n * k * 2 / (old * 1e-3) / 1e9
        print(f"{name} {m}x{n}x{k}: torch {times['torch'] * 1e3:.1f} us, read B {times['read B'] * 1e3:.1f}, sweep best "
              f"{old * 1e3:.1f} ({gbs:.0f} GB/s), extra best {new_key[0] * 1e3:.1f} {new_key[1]}", flush=True)  # fmt: skip
    command = "PYTHONPATH=$PWD OUT=$OUT python3 experiments/decode_tiles.py"
    print("wrote", write_rows(f"decode-tiles-{gpu}", command, rows), file=sys.stderr)


if __name__ == "__main__":
    main()
