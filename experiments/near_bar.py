"""The shapes nearest under issue 4's bar: non-power-of-two split-K slices, deeper split-K, TMA and mid-depth tiles.

After the coalesced element-wise loads and the tile copy, four H100 random-dev shapes stayed under 0.85x of
torch.matmul with the best config of the space (dev124 768x3200x4224 0.76x, dev044 128x1280x2944 0.83x, dev091
344x54x2858 0.84x, dev072 1536x512x640 0.85x).  The space's split-K slices are powers of two, so a shape of 40 output
tiles (dev044, 64x64) runs 80 or 160 programs on 132 SMs; its deep pipelines are persistent and TMA 64x64 to
128x128 at 8-12 stages.  This times, on every shape of both suites whose committed best reads under 0.9x of
torch.matmul in its final round, candidates off the space (3, 5, 6, 12, 20 and 24 slices; split-K 64x64x64 at 8 stages;
TMA 64x64x64 and 6-stage tiles) beside the sweep's three fastest configs and torch.matmul, as ``validate`` times a
shape.  Run on a GPU from the repository root (writes ``$OUT/near-bar-<gpu>.json``)::

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/near_bar.py

``--space SUITE`` times SPACE (the candidates that won a shape, in the kernels' space since 2026-11-27) on
every shape of a suite the same way; ``--merge TIMES RESULTS`` (no GPU) adds those times to a committed results file
(``harness.merge_times``); ``--model FILE PROFILE`` (no GPU) prints, per shape of a run, the sweep's best over SPACE's
best measured beside the model's view with SPACE added to the space.
"""

from typing import Any

CANDIDATES = (
    [f"splitk/64x64x128/g8/w4/s4/k{s}" for s in (3, 5, 6, 12)]
    + [f"splitk/64x64x64/g8/w4/s8/k{s}" for s in (2, 3, 4, 6)]
    + [f"splitk/32x128x64/g8/w4/s4/k{s}" for s in (3, 6, 12)]
    + [f"splitk/64x128x64/g8/w4/s4/k{s}" for s in (3, 4, 6, 8, 12, 20, 24)]
    + [f"splitk/16x64x128/g8/w4/s4/k{s}" for s in (3, 6, 12)]
    + ["splitk/128x128x64/g8/w8/s4/k3"]
    + ["tma/64x64x64/g8/w4/s4/k1", "tma/64x64x64/g8/w4/s8/k1", "tma/128x64x64/g8/w4/s6/k1", "tma/64x128x64/g8/w4/s6/k1"]
    + ["persistent/64x64x64/g8/w4/s6/k1", "persistent/64x128x64/g8/w4/s6/k1", "persistent/128x64x64/g8/w4/s6/k1"]
)
BAR = 0.9
# the candidates that beat a shape's sweep best in the first run (near-bar-h100.json); in kernels.config's space since
# 2026-11-27
SPACE = (
    "splitk/64x64x64/g8/w4/s8/k2", "splitk/64x64x64/g8/w4/s8/k3", "splitk/64x64x128/g8/w4/s4/k3",
    "splitk/64x64x128/g8/w4/s4/k5", "splitk/64x64x128/g8/w4/s4/k12", "splitk/16x64x128/g8/w4/s4/k6",
)  # fmt: skip


def candidates(shape: Any) -> list[str]:
    """CANDIDATES where the shape's final round read under BAR of torch.matmul, else none."""
    final = shape.final_ms or {}
    ours = [t for c, t in final.items() if c != "torch" and t]
    if not final.get("torch") or not ours or final["torch"] / min(ours) >= BAR:
        return []
    return list(CANDIDATES)


def main() -> None:
    import sys

    if sys.argv[1:2] == ["--merge"]:
        from harness import merge_times

        added, closest = merge_times(sys.argv[2], sys.argv[3], SPACE, "near_bar.py")
        print(f"{sys.argv[3]}: {added} config times added (closest to a sweep best: {closest:.3f})")
        return
    if sys.argv[1:2] == ["--model"]:  # SPACE added to the space without compiler facts
        from deep_stages import model_check

        model_check(sys.argv[2], sys.argv[3], SPACE, "SPACE")
        return
    from harness import gpu_name, sweep_shapes, time_candidates

    gpu = gpu_name()
    if sys.argv[1:2] == ["--space"]:
        suite = sys.argv[2]
        todo = sweep_shapes(gpu, (suite,), lambda s: list(SPACE))
        time_candidates(todo, "space", f"near-bar-space-{suite}-{gpu}", f"near_bar.py --space {suite}")
        return
    todo = sweep_shapes(gpu, ("llm", "random-dev"), candidates)
    print(len(todo), "shapes", flush=True)
    time_candidates(todo, "off-space", f"near-bar-{gpu}", "near_bar.py")


if __name__ == "__main__":
    main()
