"""What does a stream of B bytes cost beyond B / bandwidth, and how much of it did the L2 flush's write-back add?

The picks' predicted / measured time is lowest (0.68-0.70, H100) for 10-100 µs shapes, mostly weight streams at
small M that read at 0.48-0.67 of the HBM read probe.  Two candidate causes, told apart here side by side:

- the timing's L2 flush: zeroing a 256 MB buffer (do_bench's flush) leaves the L2 full of dirty lines whose write-back
  the timed kernel pays (``flush_writeback.py``: 5-10 µs);
- a stream's own start and end: a read of B bytes taking t0 + B / bandwidth with a t0 of microseconds.

Times, with both flushes (``Timer(flush="write")``, do_bench's; ``Timer(flush="read")``, a read of 4x the L2), an
empty kernel and the HBM probe's read kernel (one 1024-float block per program, ``.cg`` loads) over 1 MB to 1 GB, and
torch.matmul beside the model's pick (this GPU's bundled profile) and two fixed decode configs on weight-streaming
shapes (M = 1, 16, 64 against Llama-sized weights, layout nt) and three compute-bound ones.

Run on a GPU from the repository root (writes ``$OUT/stream-ramp-<gpu>.json``)::

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/stream_ramp.py
"""

import json
import os
import sys
from typing import Any

SIZES_MB = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
WEIGHTS = ((4096, 4096), (14336, 4096), (4096, 14336), (8192, 28672), (128256, 4096))  # (N, K) as nn.Linear's [out, in]
DECODE_M = (1, 16, 64)
COMPUTE = ((512, 4096, 14336, "nt"), (4096, 4096, 4096, "nn"), (8192, 8192, 8192, "nn"))
FIXED = ("persistent/16x64x256/g8/w4/s4/k1", "splitk/16x64x128/g8/w4/s4/k2")


def stream_rows(timers: dict[str, Any], sm_count: int) -> list[dict[str, Any]]:
    import torch
    from theodolite.probes.launch import empty_kernel
    from theodolite.probes.stream import StreamVariant, launch_stream

    variant = StreamVariant(block=1024, warps=4)  # the read probe's fastest variant on both GPUs
    src = torch.rand((max(SIZES_MB) << 20) // 4, device="cuda")
    sink = torch.empty(variant.block, device="cuda")
    x = torch.zeros(1, device="cuda")
    fns = [lambda: empty_kernel[(1,)](x)] + [
        (lambda b=mb << 20: launch_stream("read", variant, sm_count, src, None, sink, b)) for mb in SIZES_MB
    ]
    for fn in fns:
        fn()
    rows = []
    for flush, timer in timers.items():
        times = timer.flushed_interleaved(fns)
        rows.append({"what": "empty", "flush": flush, "bytes": 0, "us": times[0] * 1e3})
        for mb, ms in zip(SIZES_MB, times[1:], strict=True):
            rows.append({"what": "read", "flush": flush, "bytes": mb << 20, "us": ms * 1e3})
    return rows


def gemm_rows(timers: dict[str, Any], gpu_profile: str) -> list[dict[str, Any]]:
    import torch
    from harness import add_runs
    from theodolite.kernels.benchmark import make_inputs

    from theodolite import select

    shapes = [(m, n, k, "nt") for n, k in WEIGHTS for m in DECODE_M] + list(COMPUTE)
    rows = []
    for m, n, k, layout in shapes:
        a, b = make_inputs(m, n, k, "bf16", layout, torch.device("cuda"), seed=m + n + k)
        out = torch.empty((m, n), device="cuda", dtype=torch.bfloat16)
        ref = torch.matmul(a.float(), b.float())
        pick = select(m, n, k, layout=layout, profile=gpu_profile)
        keys = [pick.config.key] + [key for key in FIXED if key != pick.config.key]
        calls: dict[str, Any] = {"torch": [lambda a=a, b=b, out=out: torch.matmul(a, b, out=out)]}
        add_runs(calls, [(a, b, out)], keys, ref)
        names = list(calls)
        for flush, timer in timers.items():
            times = timer.flushed_interleaved([calls[key][0] for key in names])
            for key, ms in zip(names, times, strict=True):
                rows.append({
                    "M": m, "N": n, "K": k, "layout": layout, "config": key, "pick": key == pick.config.key,
                    "predicted_us": pick.predicted_time_s * 1e6 if key == pick.config.key else None, "flush": flush,
                    "weight_bytes": 2 * n * k, "us": ms * 1e3,
                })  # fmt: skip
        del a, b, out, ref
        torch.cuda.empty_cache()
    return rows


def main() -> None:
    import torch
    from harness import gpu_name
    from theodolite.kernels.benchmark import Timer

    gpu = gpu_name()
    profile = {"h100": "profiles/nvidia-h100-80gb-hbm3.h5", "h200": "profiles/nvidia-h200.h5"}[gpu]
    timers = {"write": Timer(flush="write"), "read": Timer(flush="read")}
    sm_count = torch.cuda.get_device_properties(0).multi_processor_count
    streams = stream_rows(timers, sm_count)
    gemms = gemm_rows(timers, profile)
    out = os.path.join(os.environ.get("OUT", "."), f"stream-ramp-{gpu}.json")
    with open(out, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                   "command": "PYTHONPATH=$PWD OUT=$OUT python3 experiments/stream_ramp.py",
                   "streams": streams, "gemms": gemms}, f, indent=1)  # fmt: skip
    print(f"{'what':>10} {'MB':>6} {'write-flush us':>15} {'read-flush us':>14}")
    for row in streams:
        if row["flush"] == "write":
            other = next(r for r in streams if r["flush"] == "read" and r["bytes"] == row["bytes"])
            print(f"{row['what']:>10} {row['bytes'] >> 20:>6} {row['us']:>15.2f} {other['us']:>14.2f}")
    for row in gemms:
        if row["flush"] == "write":
            other = next(r for r in gemms if r["flush"] == "read" and r["config"] == row["config"]
                         and (r["M"], r["N"], r["K"]) == (row["M"], row["N"], row["K"]))  # fmt: skip
            pred = f"{row['predicted_us']:.1f}" if row["predicted_us"] else ""
            print(f"{row['M']}x{row['N']}x{row['K']} {row['config']:>36} {row['us']:8.2f} {other['us']:8.2f} {pred}")


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    main()
