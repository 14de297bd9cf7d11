"""Does the matrix clock fall with the number of busy SMs, in bursts like validation's?

Over the seen H200 sweeps, one-wave configs of long K bound by their matrix instructions run 12-19% under their
price (against their shape's median) on half the SMs or fewer, and -7% / +4% (pointer / TMA) over half of them
(docs/model.md, absolute times).  The model converts every cycle count and the matrix rate at the profile's sustained
matrix clock (``clock_sustained_matrix_hz``: the level after 2 s of a full matrix load), while validation times
bursts of short kernels between L2 flushes, where a card drawing less power may hold a higher clock.  This reads the
clock (``%clock64`` over ``%globaltimer`` of program 0, the clock probe's method) of the probe's on-chip dot kernel on
8 to all SMs, one program each, in bursts of ~20 µs launches between read flushes of 4x the L2 (as
``kernels.benchmark.Timer``): once from idle, and once right after the clock probe's 2 s full-load train.

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/clock_vs_sms.py          # GPU: $OUT/clock-vs-sms-GPU.json (~30 s)
    PYTHONPATH=$PWD python3 experiments/clock_vs_sms.py --summary F.json PROFILE   # no GPU: against the profile

H200, 2026-11-29 (``experiments/clock-vs-sms-h200.json``): from idle 1.80 GHz on 8-33 busy SMs, 1.73 on 66, 1.71 on
99, 1.67 on all 132 (the profile's sustained matrix clock 1.59); after the 2 s train 1.49-1.76, not monotone in the
SMs.  The clock explains ~8% of the few-SM gap; priced in, selection did not move (docs/model.md, absolute times).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from typing import Any

SM_SHARES = (1 / 16, 1 / 8, 1 / 4, 1 / 2, 3 / 4, 1.0)  # busy SMs as a share of the GPU's
BURST_S = 0.008  # validation's timing budget per config (Timer rep_ms)
LAUNCH_S = 20e-6  # one launch of the dot kernel
SETTLE_S = 0.001  # launches in the burst's first millisecond are left out (the clock's own ramp)
IDLE_S = 0.3  # the pause before a burst from idle
TILE = (128, 256, 64, 8)  # the clock probe's matrix tile (BM, BN, BK, warps)


def burst(n: int, flush: Any, sink: Any, a: Any, b: Any, out: Any, iters: int) -> list[float]:
    """Clock (Hz) of each launch of ``n`` dot programs in a burst of BURST_S, a read flush before each."""
    import torch
    from theodolite.probes.matrix import mma_kernel

    bm, bn, bk, warps = TILE
    launches = max(8, int(BURST_S / LAUNCH_S))
    times = torch.zeros(launches, 4, dtype=torch.int64, device="cuda")
    for i in range(launches):
        torch.sum(flush, dim=0, out=sink)
        mma_kernel[(n,)](a, b, out, times[i], iters, BM=bm, BN=bn, BK=bk, PRECISION="ieee", TIMED=True,
                         num_warps=warps, num_stages=1)  # fmt: skip
    torch.cuda.synchronize()
    rows = times[:, :3].double().cpu().tolist()
    start = rows[0][2]
    return [c / g * 1e9 for c, g, t in rows if g > 0 and (t - start) * 1e-9 >= SETTLE_S]


def run(out_dir: str) -> None:
    import torch
    from harness import gpu_name
    from theodolite.probes import clock
    from theodolite.probes.common import ProbeContext
    from theodolite.probes.matrix import _operands, mma_kernel

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    bm, bn, bk, warps = TILE
    a, b = _operands("bf16", bm, bn, bk, "cuda")
    out = torch.empty(2 * sms, dtype=torch.float32, device="cuda")
    flush = torch.ones(4 * l2 // 4, dtype=torch.float32, device="cuda")
    sink = torch.empty((), dtype=torch.float32, device="cuda")
    # ITERS for LAUNCH_S at this clock: one timed launch of 64 dots on every SM, scaled
    row = torch.zeros(4, dtype=torch.int64, device="cuda")
    mma_kernel[(sms,)](a, b, out, row, 64, BM=bm, BN=bn, BK=bk, PRECISION="ieee", TIMED=True, num_warps=warps,
                       num_stages=1)  # fmt: skip
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    mma_kernel[(sms,)](a, b, out, row, 64, BM=bm, BN=bn, BK=bk, PRECISION="ieee", TIMED=True, num_warps=warps,
                       num_stages=1)  # fmt: skip
    end.record()
    end.synchronize()
    iters = max(16, int(64 * LAUNCH_S / (start.elapsed_time(end) * 1e-3)))
    counts = sorted({max(1, round(share * sms)) for share in SM_SHARES})
    ctx = ProbeContext(device=0, sm_count=sms)
    rows = []
    for regime in ("idle", "after-train"):
        for n in counts:
            if regime == "idle":
                time.sleep(IDLE_S)
            else:
                clock.sustained(ctx, clock.TRAIN_S)  # the clock probe's 2 s full-load train, then the burst
            hz = burst(n, flush, sink, a, b, out, iters)
            rows.append({"regime": regime, "programs": n, "sms": sms, "launches": len(hz),
                         "clock_hz_median": statistics.median(hz) if hz else None,
                         "clock_hz_min": min(hz) if hz else None, "clock_hz_max": max(hz) if hz else None})  # fmt: skip
            last = rows[-1]
            print(f"{regime:11s} {n:4d} of {sms} SMs: {last['clock_hz_median'] / 1e9:.3f} GHz median "
                  f"({last['clock_hz_min'] / 1e9:.3f}-{last['clock_hz_max'] / 1e9:.3f}, {len(hz)} launches)",
                  flush=True)  # fmt: skip
    path = os.path.join(out_dir, f"clock-vs-sms-{gpu_name()}.json")
    with open(path, "w") as stream:
        json.dump({"command": "PYTHONPATH=$PWD OUT=$OUT python3 experiments/clock_vs_sms.py",
                   "launch_iters": iters, "rows": rows}, stream, indent=1)  # fmt: skip
    print("wrote", path, file=sys.stderr)


def summary(path: str, profile_path: str) -> None:
    """Each burst's median clock against the profile's sustained matrix clock and its maximum."""
    from theodolite.profile.hdf5 import load_profile

    profile = load_profile(profile_path)
    sustained = float(profile.value("clock_sustained_matrix_hz"))
    peak = float(profile.get("clock_max_hz") or 0.0)
    with open(path) as stream:
        rows = json.load(stream)["rows"]
    print(f"profile: sustained matrix clock {sustained / 1e9:.3f} GHz, maximum {peak / 1e9:.3f} GHz")
    for row in rows:
        hz = row["clock_hz_median"]
        if hz:
            of_peak = hz / peak if peak else float("nan")
            print(f"  {row['regime']:11s} {row['programs']:4d} of {row['sms']} SMs: {hz / 1e9:.3f} GHz, "
                  f"{hz / sustained:.3f}x the sustained clock, {of_peak:.3f}x the maximum")  # fmt: skip


if __name__ == "__main__":
    from harness import dispatch

    dispatch(run, summary)
