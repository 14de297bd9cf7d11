"""Element-wise K-steps against the programs resident on an SM: do co-resident programs share their load issue?

After the int32-offset kernels, deeper splits of element-wise ("scalar") builds win where the model says they cannot:
it charges two programs on one SM each other's load issue, so a K-step at two resident programs costs ~1.5x one at one
(H100 dev054 364x129x2317, split-K 64x64x128: k4, one program per SM, 5 K-steps per slice, 17.2 us; k8, two on most
SMs, 3 K-steps, 13.0 us).  This measures it directly: for each tile, a shape with 33 output tiles (N and K odd, so both
operands are read element-wise; never copied here), split-K configs of that tile at 2, 4 and 8 slices (66, 132 and 264
programs: half the SMs, one per SM, two per SM) and K chosen for 2, 4 and 8 K-steps per slice.  The slope of time
over K-steps per slice at each split is one K-step at that residency, measured beside torch.matmul as ``validate``
times a shape (graph replays).
Run on a GPU from the repository root (writes ``$OUT/scalar-residency-<gpu>.json``, prints the slopes)::

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/scalar_residency.py
"""

import sys

import numpy as np

# (split-K tile, warps, stages, M, N) with 33 output tiles; N odd (B element-wise); warps and stages as in the space
TILES = (("16x64x128", 4, 4, 176, 191), ("32x128x64", 4, 4, 96, 1407), ("64x64x128", 4, 4, 192, 703))
SPLITS = (2, 4, 8)
STEPS = (2, 4, 8)
NO_COPY = {"ALIGN_COPY_MIN_FLOPS": float("inf")}  # the copy rule would copy the larger ones: keep them element-wise


def main() -> None:
    from harness import add_runs, gpu_name, time_as_validate, validate_inputs, write_rows
    from theodolite.kernels.benchmark import Timer

    gpu = gpu_name()
    timer = Timer()
    rows = []
    for tile, warps, stages, m, n in TILES:
        bk = int(tile.split("x")[2])
        times: dict[tuple[int, int], float] = {}
        for split in SPLITS:
            for steps in STEPS:
                k = split * steps * bk - 1  # odd: A element-wise; the last slice one element short
                key = f"splitk/{tile}/g8/w{warps}/s{stages}/k{split}"
                inputs, sets, calls = validate_inputs(m, n, k, timer)
                add_runs(calls, sets, [key], inputs.ref.float(), NO_COPY)
                measured = time_as_validate(timer, inputs, calls)
                if key in measured:
                    times[(split, steps)] = measured[key] * 1e3
                    rows.append({"tile": tile, "M": m, "N": n, "K": k, "config": key, "split": split, "steps": steps,
                                 "us": measured[key] * 1e3, "torch_us": measured["torch"] * 1e3})  # fmt: skip
        for split in SPLITS:
            pts = [(steps, times[(split, steps)]) for steps in STEPS if (split, steps) in times]
            if len(pts) >= 2:
                slope = np.polyfit([p[0] for p in pts], [p[1] for p in pts], 1)[0]
                print(f"{tile} k{split} ({33 * split} programs): {slope:.3f} us per K-step; "
                      + " ".join(f"{s} steps {t:.2f} us" for s, t in pts), flush=True)  # fmt: skip
    command = "PYTHONPATH=$PWD OUT=$OUT python3 experiments/scalar_residency.py"
    print("wrote", write_rows(f"scalar-residency-{gpu}", command, rows), file=sys.stderr)


if __name__ == "__main__":
    main()
