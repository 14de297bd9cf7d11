"""What a zero-filled prologue stage costs at each copy width (16-byte, 8-byte and 4-byte cp.async).

A loop shorter than its pipeline still issues ``stages - 1`` prefetches; the ones past the last K-step are masked and
zero-fill their stage.  One K-step (K <= 64, BLOCK_K 64) with 2, 3 and 4 stages has 0, 1 and 2 such stages, so the
time over the stage count is their price.  Operand widths come from the row strides: N = 64 / 68 / 66 gives B rows of
16-, 8- and 4-byte vectors, K = 64 / 60 / 62 the same for A.  One tile (one program) and 132 tiles (one per SM), graph
replays over rotated inputs as ``theodolite validate`` times small shapes.  ``--mixed``: one operand element-wise (rows
of 2-byte elements, misaligned), the other 16-byte vectors, and 16x64x128 tiles too (writes
``zero-fill-mixed-<gpu>.json``).  Run on a GPU from the repository root (writes ``$OUT/zero-fill-<gpu>.json``)::

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/zero_fill.py

Then, on any machine, ``--fit FILE PROFILE`` prints ``model_zero_fill_cycles`` for that GPU: the least-squares slope
(through the origin) of the cost per zero-filled stage ((time at 4 stages - time at 2) / 2) over the stage's
warp-wide copies (each operand's rows x BLOCK_K x 2 bytes / its copy width / 32 lanes), in cycles of the profile's
sustained clock::

    python3 experiments/zero_fill.py --fit experiments/zero-fill-h100.json \
        profiles/nvidia-h100-80gb-hbm3.h5
"""

import json
import sys

import numpy as np

WIDTHS = {"16": (64, 64), "8": (68, 60), "4": (66, 62)}  # copy width -> (N giving B that width, K giving A that width)
TILES = (("64x64x64", 4), ("128x128x64", 8))
MIXED_TILES = TILES + (("16x64x128", 4),)


def shapes() -> list[tuple[str, int, int, int]]:
    # --mixed: one operand element-wise (2-byte rows), the other 16-byte: "scalar-a" / "scalar-b" builds
    if "--mixed" in sys.argv:
        return [(label, 64 * tm, 64 * (tn - 1) + n, k) for tm, tn in ((1, 1), (12, 11))
                for label, n, k in (("A2B16", 64, 63), ("A16B2", 63, 64))]  # fmt: skip
    out = []
    for tiles_m, tiles_n in ((1, 1), (12, 11)):
        for a_width, (_, k) in WIDTHS.items():
            for b_width, (n, _) in WIDTHS.items():
                if a_width != "16" and b_width != "16" and a_width != b_width:
                    continue
                out.append((f"A{a_width}B{b_width}", 64 * tiles_m, 64 * (tiles_n - 1) + n, k))
    return out


def fit(path: str, profile_path: str) -> float:
    """Cycles per warp-wide masked copy from a measured file (see the module docstring)."""
    from theodolite.profile import load_profile

    with open(path) as stream:
        rows = json.load(stream)["rows"]
    us = {(r["widths"], r["M"], r["N"], r["K"], r["config"]): r["us"] for r in rows}
    copies, costs = [], []
    for (widths, m, n, k, key), two in us.items():
        four = us.get((widths, m, n, k, key.replace("/s2/", "/s4/")))
        if "/s2/" not in key or four is None:
            continue
        bm, bn, bk = (int(x) for x in key.split("/")[1].split("x"))
        a_width, b_width = (int(x) for x in widths[1:].split("B"))
        copies.append(bk * 2 * (bm / a_width + bn / b_width) / 32)
        costs.append((four - two) / 2 * 1e-6)
    x, y = np.array(copies), np.array(costs)
    clock = float(load_profile(profile_path).value("clock_sustained_matrix_hz"))
    cycles = float(x @ y / (x @ x)) * clock
    print(f"{len(x)} (shape, tile) pairs: {cycles:.2f} cycles per warp-wide masked copy at {clock / 1e9:.3f} GHz")
    return cycles


def main() -> None:
    if sys.argv[1:2] == ["--fit"]:
        fit(sys.argv[2], sys.argv[3])
        return
    import torch
    from harness import add_runs, gpu_name, rotated_inputs, time_all, write_rows
    from theodolite.kernels.benchmark import Timer

    device = torch.device("cuda")
    gpu = gpu_name()
    timer = Timer()
    rows = []
    for label, m, n, k in shapes():
        sets, calls, ref = rotated_inputs(m, n, k, timer, device)
        tiles = MIXED_TILES if "--mixed" in sys.argv else TILES
        add_runs(calls, sets, [f"persistent/{tile}/g8/w{warps}/s{stages}/k1" for tile, warps in tiles
                               for stages in (2, 3, 4)], ref)  # fmt: skip
        times = time_all(timer, calls)
        for key, ms in times.items():
            rows.append({"widths": label, "M": m, "N": n, "K": k, "config": key, "us": ms * 1e3})
        for tile, warps in tiles:
            us = [times.get(f"persistent/{tile}/g8/w{warps}/s{s}/k1", np.nan) * 1e3 for s in (2, 3, 4)]
            print(f"{label} {m}x{n}x{k} {tile}: s2 {us[0]:.2f} s3 {us[1]:.2f} s4 {us[2]:.2f} us "
                  f"(per zero-filled stage {(us[2] - us[0]) / 2:+.2f})", flush=True)  # fmt: skip
    mixed = "--mixed" in sys.argv
    command = "PYTHONPATH=$PWD OUT=$OUT python3 experiments/zero_fill.py" + " --mixed" * mixed
    print("wrote", write_rows(f"zero-fill{'-mixed' if mixed else ''}-{gpu}", command, rows), file=sys.stderr)


if __name__ == "__main__":
    main()
