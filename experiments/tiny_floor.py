"""The floor of a tiny GEMM on the GPU: where do our kernels lose 1-2 us to cuBLAS on small aligned shapes?

Random-dev's aligned losers under 0.85x of torch.matmul include small shapes that take 5-8 us (dev072
1536x512x640, dev052 2048x128x1664, dev044 128x1280x2944).  Per shape, as ``validate`` times it (CUDA-graph replays: GPU
time per call, kernel boundaries included): torch.matmul; an empty Triton kernel on one program and on one program per
SM (the launch floor); a kernel that only writes its output tile (zeros), one program per tile (the epilogue's floor);
and a few configs of our space.  Run on a GPU from the repository root (writes ``$OUT/tiny-floor-<gpu>.json``)::

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/tiny_floor.py
"""

import sys
from typing import Any

import triton
import triton.language as tl

SHAPES = ((64, 64, 64), (128, 128, 64), (256, 256, 64), (128, 128, 640), (1536, 512, 640), (2048, 128, 1664),
          (128, 1280, 2944), (128, 5248, 1920))  # fmt: skip
CONFIGS = ("persistent/64x64x64/g8/w4/s4/k1", "persistent/64x128x64/g8/w4/s4/k1", "persistent/128x64x64/g8/w4/s4/k1/f",
           "persistent/64x64x64/g8/w4/s2/k1", "persistent/16x64x32/g8/w4/s2/k1", "tma/64x128x64/g8/w4/s4/k1",
           "splitk/64x64x128/g8/w4/s4/k2")  # fmt: skip
SMS = 132


@triton.jit
def empty_kernel(x_ptr):
    """Nothing: the launch and the kernel boundary."""
    pass


@triton.jit
def store_kernel(out_ptr, M, N, stride_om, BM: tl.constexpr, BN: tl.constexpr):
    """Each program writes its output tile (zeros), 16-byte stores: the epilogue alone."""
    pid = tl.program_id(0)
    tiles_n = tl.cdiv(N, BN)
    rows = (pid // tiles_n) * BM + tl.arange(0, BM)
    cols = (pid % tiles_n) * BN + tl.arange(0, BN)
    stride_om = (stride_om // 8) * 8
    ptrs = out_ptr + rows.to(tl.int64)[:, None] * stride_om + cols[None, :]
    tl.store(ptrs, tl.zeros((BM, BN), dtype=out_ptr.dtype.element_ty), mask=(rows[:, None] < M) & (cols[None, :] < N))


def launches(sets: list[Any], what: str) -> list[Any]:
    """Each (A, B, out) set's direct launch of 'empty/1', 'empty/132' or 'store/BMxBN'."""
    from theodolite.kernels.launch import _Launch

    kind, _, arg = what.partition("/")
    runs = []
    for _, _, out in sets:
        if kind == "empty":
            runs.append(_Launch(empty_kernel, (int(arg),), (out,), {"num_warps": 4}))
        else:
            bm, bn = (int(x) for x in arg.split("x"))
            m, n = out.shape
            grid = (-(-m // bm) * -(-n // bn),)
            runs.append(_Launch(store_kernel, grid, (out, m, n, out.stride(0)), {"BM": bm, "BN": bn, "num_warps": 4}))
    return runs


def main() -> None:
    import torch
    from harness import add_runs, gpu_name, print_times, shape_rows, time_as_validate, validate_inputs, write_rows
    from theodolite.kernels.benchmark import Timer

    timer = Timer()
    rows = []
    for m, n, k in SHAPES:
        inputs, sets, calls = validate_inputs(m, n, k, timer)
        add_runs(calls, sets, CONFIGS, inputs.ref.float())
        for what in ("empty/1", f"empty/{SMS}", "store/64x64", "store/64x128", "store/128x128"):
            runs = launches(sets, what)
            runs[0]()  # compile, then the direct launcher
            calls[what] = runs
        torch.cuda.synchronize()
        times = time_as_validate(timer, inputs, calls)
        rows += shape_rows(m, n, k, times)
        print_times(m, n, k, times)
    command = "PYTHONPATH=$PWD OUT=$OUT python3 experiments/tiny_floor.py"
    print("wrote", write_rows(f"tiny-floor-{gpu_name()}", command, rows), file=sys.stderr)


if __name__ == "__main__":
    main()
