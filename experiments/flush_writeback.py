"""Does the L2 flush before each timed run leave work behind for the kernel it times?

``triton.testing.do_bench`` (and ``validate``'s L2-flushed runs, for shapes whose inputs exceed half of L2) clear the
L2 by zeroing a 256 MB buffer before each run.  That leaves the L2 full of dirty lines, which the timed kernel's own
reads evict: their write-back to HBM (up to the L2's size, ~50 MB on the H100) competes with the kernel's reads.  A
memory-bound kernel of a few tens of microseconds could pay ~15 us for it.  This times, for the llm shapes with few
rows (B read once, ~20-40 us), torch.matmul and the sweep's fastest config with two flushes, interleaved run by run
(CUDA events around the kernel only):

- ``dirty``: do_bench's flush (zero the 256 MB buffer);
- ``clean``: the same, then a read of a second 256 MB buffer (its sum), so the L2 holds clean lines.

Run on a GPU from the repository root (writes ``$OUT/flush-writeback-<gpu>.json``)::

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/flush_writeback.py
"""

import statistics
import sys
from typing import Any

SHAPES = (
    ("llama3-8b.o", 128, 4096, 4096),
    ("llama3-70b-tp8.down", 128, 8192, 3584),
    ("llama3-70b.o", 128, 8192, 8192),
    ("llama3-8b.qkv", 512, 6144, 4096),
    ("llama3-70b.down", 16, 8192, 28672),
    ("llama3-8b.gate_up", 4096, 28672, 4096),
)
REPS = 60


def main() -> None:
    import torch
    from harness import add_runs, fastest, gpu_name, write_rows
    from theodolite.kernels.benchmark import make_inputs
    from theodolite.results import load_results

    gpu = gpu_name()
    device = torch.device("cuda")
    sweep = {(s.name, s.M): s for s in load_results(f"reports/results/validate-llm-{gpu}.json").shapes}
    dirty_buf = torch.empty(256 * 2**20 // 4, dtype=torch.int32, device=device)
    clean_buf = torch.ones(256 * 2**20 // 4, dtype=torch.int32, device=device)

    def flush(clean: bool) -> None:
        dirty_buf.zero_()
        if clean:
            clean_buf.sum()

    rows = []
    for name, m, n, k in SHAPES:
        a, b = make_inputs(m, n, k, "bf16", "nn", device, seed=m + n + k)
        out = torch.empty((m, n), device=device, dtype=torch.bfloat16)
        ref = torch.matmul(a.float(), b.float())
        calls: dict[str, list[Any]] = {"torch": [lambda: torch.matmul(a, b, out=out)]}
        add_runs(calls, [(a, b, out)], fastest(sweep[(name, m)].configs, 1), ref)
        times: dict[tuple[str, bool], list[float]] = {(c, clean): [] for c in calls for clean in (False, True)}
        for fn in calls.values():
            for _ in range(5):
                fn[0]()
        torch.cuda.synchronize()
        for _ in range(REPS):
            for c, fn in calls.items():
                for clean in (False, True):
                    flush(clean)
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                    fn[0]()
                    end.record()
                    end.synchronize()
                    times[(c, clean)].append(start.elapsed_time(end) * 1e3)
        for (c, clean), values in times.items():
            rows.append({"shape": name, "M": m, "N": n, "K": k, "config": c, "flush": "clean" if clean else "dirty",
                         "us": statistics.median(values)})  # fmt: skip
        print(f"{name} {m}x{n}x{k}: " + "  ".join(
            f"{c.split('/')[0]} dirty {statistics.median(times[(c, False)]):.1f} clean "
            f"{statistics.median(times[(c, True)]):.1f} us" for c in calls), flush=True)  # fmt: skip
    command = "PYTHONPATH=$PWD OUT=$OUT python3 experiments/flush_writeback.py"
    print("wrote", write_rows(f"flush-writeback-{gpu}", command, rows), file=sys.stderr)


if __name__ == "__main__":
    main()
