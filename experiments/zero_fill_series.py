"""Zero-filled stages against pipeline depth and split-K depth, on the short-K shapes where the refit price disagreed.

The 2026-11-26 refit of the loaded-latency K-step (CHANGELOG.md, "The loaded-latency K-step with six deep configs")
needed a high per-copy price of a zero-filled prologue stage for the deep configs on short K (persistent 64x64x64 s8
on dev035 68x702x82: 7.1 us against 4.8 for s4) and a low one for split-K's short slices (dev037 21x814x808: k4 with
one zero-filled stage 5.9 us against k2 7.0).  This times, side by side as ``theodolite validate`` times a shape,
persistent 64x64x64 at 2-12 stages and split-K 16x64x128 at k2-k16 in 2-4 stages (the same work, one to three
prefetched stages, so more or fewer of them zero-filled), on those random-dev shapes and two aligned short-K ones.
Run on a GPU from the repository root (writes ``$OUT/zero-fill-series-<gpu>.json``)::

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/zero_fill_series.py
"""

import sys

SHAPES = [
    (68, 702, 82),  # dev035: 4-byte rows, two 64-deep K-steps
    (73, 498, 70),  # dev009
    (21, 814, 808),  # dev037: split-K depth flips on the H200
    (93, 80, 12312),  # dev097
    (128, 128, 9984),  # dev172
    (1024, 1024, 128),  # aligned, two 64-deep K-steps
    (256, 4096, 256),  # aligned, four
]
SERIES = [f"persistent/64x64x64/g8/w4/s{s}/k1" for s in (2, 3, 4, 6, 8, 12)] + [
    f"splitk/16x64x128/g8/w4/s{s}/k{k}" for k in (2, 4, 8, 16) for s in (2, 3, 4)
]


def main() -> None:
    import harness
    from harness import gpu_name, time_candidates

    harness.in_workers.__defaults__ = (8,)
    gpu = gpu_name()
    base = ["persistent/64x64x64/g8/w4/s4/k1"]
    # split-K's rule on the sizes (legality's): K deep enough for the slices
    todo = [
        (f"zerofill:{m}x{n}x{k}", m, n, k, base,
         [c for c in SERIES if c not in base and not (c.startswith("splitk/") and int(c.rsplit("/k", 1)[1]) * 128 > k)])
        for m, n, k in SHAPES
    ]  # fmt: skip
    print("wrote", time_candidates(todo, "series", f"zero-fill-series-{gpu}", "zero_fill_series.py"), file=sys.stderr)


if __name__ == "__main__":
    main()
