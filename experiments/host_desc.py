"""TMA descriptors made on the host instead of in the kernel: is the TMA variant's fixed cost the descriptors?

``tiny_floor.py`` found our TMA configs 1.4-2.0 us slower than the pointer kernel with the same tile on small shapes
(64x128x64 s4: 3.88 against 2.33 us at 64x64x64; 15.8 against 13.8 at 128x5248x1920): the kernel builds its two
descriptors in global memory (``tl.make_tensor_descriptor``) before its first load.  Here the same persistent TMA
kernel (``composite_tiles.composite_kernel``, power-of-two tiles) with in-kernel descriptors, and with
``triton.tools.tensor_descriptor.TensorDescriptor`` arguments (``HOST_DESC``: the CUtensorMap encoded by the launcher on
the host, passed as a kernel parameter), beside our TMA and
pointer kernels and torch.matmul, as ``validate`` times a shape.  Run on a GPU from the repository root (writes
``$OUT/host-desc-<gpu>.json``)::

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/host_desc.py

``--shipped``: the same through ``kernels/tma.py`` and ``plan_gemm`` with ``THEODOLITE_TMA_HOST_DESC`` off and on
(the space's TMA configs and two deep ones), side by side, and the host's time per cached ``gemm()`` call both ways
(writes ``$OUT/host-desc-shipped-<gpu>.json``).
"""

import os
import sys
import time
from types import SimpleNamespace
from typing import Any

from composite_tiles import composite_kernel

SHAPES = ((64, 64, 64), (128, 128, 640), (1536, 512, 640), (128, 5248, 1920), (128, 4096, 4096), (128, 6144, 4096),
          (128, 8192, 3584), (512, 4096, 4096), (512, 4096, 14336), (64, 4096, 4096))  # fmt: skip
TILES = ((64, 128, 4, 4), (64, 128, 4, 8), (128, 128, 8, 6), (64, 64, 4, 8))  # BM, BN, warps, stages
BK = 64
SMS = 132


def launches(sets: list[Any], key: str) -> list[Any]:
    """Each (A, B, out) set's direct launch of 'host/BMxBN/wW/sS' or 'device/BMxBN/wW/sS'."""
    from theodolite.kernels.launch import _ensure_allocator, _Launch
    from triton.tools.tensor_descriptor import TensorDescriptor

    _ensure_allocator()
    where, tile, w, s = key.split("/")
    bm, bn = (int(x) for x in tile.split("x"))
    meta = {"num_warps": int(w[1:]), "num_stages": int(s[1:])}
    runs = []
    for a, b, out in sets:
        m, k = a.shape
        n = b.shape[1]
        tiles = -(-m // bm) * -(-n // bn)
        grid = (min(tiles, SMS),)
        host = where == "host"
        a_arg = TensorDescriptor.from_tensor(a, [bm, BK]) if host else a
        b_arg = TensorDescriptor.from_tensor(b, [BK, bn]) if host else b
        args: tuple[Any, ...] = (a_arg, b_arg, out, m, n, k, a.stride(0), b.stride(0), out.stride(0), tiles, b_arg)
        kwargs = {"BM": bm, "BN0": bn, "BN1": 0, "BK": BK, "GROUP_M": 8, "A_KMAJOR": True, "B_KMAJOR": False,
                  "TRANS_OUT": False, "HOST_DESC": host, **meta}  # fmt: skip
        runs.append(_Launch(composite_kernel, grid, args, kwargs))
    return runs


SHIPPED = ("tma/64x128x64/g8/w4/s4/k1", "tma/128x128x64/g8/w8/s4/k1", "tma/128x256x64/g8/w8/s4/k1/f",
           "tma/64x128x64/g8/w4/s8/k1", "tma/128x128x64/g8/w8/s6/k1")  # fmt: skip


def host_us(a: Any, b: Any, key: str, calls: int = 2000) -> float:
    """Median host microseconds of a cached gemm() call (launch enqueued, no sync; GPU work kept tiny)."""
    import statistics

    import torch
    from theodolite.kernels import GemmConfig, gemm

    config = GemmConfig.from_key(key)
    for _ in range(5):
        gemm(a, b, config)
    torch.cuda.synchronize()
    samples = []
    for i in range(calls):
        t0 = time.perf_counter()
        gemm(a, b, config)
        samples.append(time.perf_counter() - t0)
        if i % 100 == 99:
            torch.cuda.synchronize()
    return statistics.median(samples) * 1e6


def shipped() -> None:
    """``--shipped``: kernels/tma.py through plan_gemm, descriptors made in the kernel ('device') or the host."""
    import torch
    from harness import best_by_way, first_right, gpu_name, time_as_validate, validate_inputs, way_rows, write_rows
    from theodolite.kernels import GemmConfig, plan_gemm
    from theodolite.kernels.benchmark import Timer

    timer = Timer()
    rows = []
    for m, n, k in SHAPES:
        inputs, sets, calls = validate_inputs(m, n, k, timer)
        ref = inputs.ref.float()
        for key in SHIPPED:
            for way in ("device", "host"):
                os.environ["THEODOLITE_TMA_HOST_DESC"] = "1" if way == "host" else "0"
                plans = [plan_gemm(x, y, GemmConfig.from_key(key), out=o) for x, y, o in sets]
                if first_right(plans, sets[0][2], ref, m, n, k, key, way):
                    calls[f"{key}@{way}"] = [p.run for p in plans]
        torch.cuda.synchronize()
        times = time_as_validate(timer, inputs, calls)
        rows += way_rows(f"{m}x{n}x{k}", m, n, k, times)
        best = best_by_way(times, ("device", "host"))
        print(f"{m}x{n}x{k}: torch {times['torch'] * 1e3:.2f} us, device {best['device'] * 1e3:.2f}, host "
              f"{best['host'] * 1e3:.2f}", flush=True)  # fmt: skip
    a = torch.randn(64, 64, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(64, 64, device="cuda", dtype=torch.bfloat16)
    for way in ("device", "host"):
        os.environ["THEODOLITE_TMA_HOST_DESC"] = "1" if way == "host" else "0"
        from theodolite.kernels import launch

        launch._FAST.clear()
        us = host_us(a, b, SHIPPED[0])
        rows.append({"shape": "host", "M": 64, "N": 64, "K": 64, "config": SHIPPED[0], "way": way, "host_us": us})
        print(f"host time per cached gemm() call, 64x64x64 {SHIPPED[0]}, descriptors on the {way}: {us:.2f} us")
    command = "PYTHONPATH=$PWD OUT=$OUT python3 experiments/host_desc.py --shipped"
    print("wrote", write_rows(f"host-desc-shipped-{gpu_name()}", command, rows), file=sys.stderr)


def main() -> None:
    if "--shipped" in sys.argv[1:]:
        shipped()
        return
    import torch
    from harness import add_runs, first_right, gpu_name, print_times, shape_rows, time_as_validate, validate_inputs
    from harness import write_rows
    from theodolite.kernels.benchmark import Timer

    timer = Timer()
    rows = []
    for m, n, k in SHAPES:
        inputs, sets, calls = validate_inputs(m, n, k, timer)
        ref = inputs.ref.float()
        ours = [f"{v}/{bm}x{bn}x64/g8/w{w}/s{s}/k1" for bm, bn, w, s in TILES for v in ("tma", "persistent")]
        add_runs(calls, sets, ours, ref)
        for bm, bn, w, s in TILES:
            for where in ("device", "host"):
                key = f"{where}/{bm}x{bn}/w{w}/s{s}"
                runs = launches(sets, key)
                if first_right([SimpleNamespace(run=runs[0])], sets[0][2], ref, m, n, k, key):
                    calls[key] = runs
        torch.cuda.synchronize()
        times = time_as_validate(timer, inputs, calls)
        rows += shape_rows(m, n, k, times)
        print_times(m, n, k, times)
    command = "PYTHONPATH=$PWD OUT=$OUT python3 experiments/host_desc.py"
    print("wrote", write_rows(f"host-desc-{gpu_name()}", command, rows), file=sys.stderr)


if __name__ == "__main__":
    main()
