"""HBM: read, write and copy bandwidth; SMs to saturate reads; latency beyond every cache.

Bandwidth over 2 GiB buffers (far beyond L2) with 8 programs per SM; copy counts bytes read plus
written and is checked against torch's device-to-device copy timed in the same run.  Latency: a
random pointer ring over 512 MiB, linked, then L2 flushed (the linking writes are partial lines),
then one untimed chase of lines this run has not touched since the flush.
"""

from __future__ import annotations

import numpy as np
from theodolite.probes import analysis
from theodolite.probes.chase import Ring, chase, flush_l2
from theodolite.probes.common import ProbeContext, ProbeResult, cuda_time
from theodolite.probes.stream import Streamer

from theodolite.profile.schema import Curve, Measurement


def run(ctx: ProbeContext) -> ProbeResult:
    import torch

    result = ProbeResult()
    device = f"cuda:{ctx.device}"
    nbytes = (1 << 30) if ctx.quick else (2 << 30)
    src = torch.rand(nbytes // 4, device=device)
    dst = torch.empty_like(src)
    streamer = Streamer(device, ctx.sm_count * 8, block=4096, warps=8)
    common = {"bytes": nbytes, "programs": streamer.programs, "block": streamer.block}

    def read() -> float:
        seconds, moved = streamer.read_seconds(src, nbytes)
        return moved / seconds

    def write() -> float:
        seconds, moved = streamer.write_seconds(dst, nbytes)
        return moved / seconds

    def copy_rate(interleaved: bool) -> float:
        seconds, moved = streamer.copy_seconds(src, dst, nbytes, interleaved=interleaved)
        return moved / seconds

    # two layouts (chunked slices, interleaved blocks); the faster one is measured
    layouts: dict[bool, float] = {}
    for interleaved in (False, True):
        try:
            layouts[interleaved] = max(copy_rate(interleaved) for _ in range(2))
        except Exception as error:  # the layout is an optimisation; chunked stays
            result.diagnostics[f"copy_layout_{interleaved}"] = f"failed: {type(error).__name__}: {error}"[:200]
    best_layout = max(layouts, key=lambda key: layouts[key]) if layouts else False
    copy_settings = {
        **common,
        "layout": "interleaved" if best_layout else "chunked",
        "layout_rates": str({("interleaved" if k else "chunked"): v for k, v in layouts.items()}),
    }

    def copy() -> float:
        return copy_rate(best_layout)

    for name, fn, method, settings in (
        ("hbm_read_bandwidth", read, "hbm.read_cg", common),
        ("hbm_write_bandwidth", write, "hbm.write", common),
        ("hbm_copy_bandwidth", copy, "hbm.copy", copy_settings),
    ):
        fn()
        result.metrics[name] = analysis.measure_with_retries(
            fn,
            name,
            "B/s",
            method,
            repeats=ctx.repeats,
            retries=ctx.retries,
            cv_threshold=ctx.cv_threshold,
            settings=settings,
        )

    # torch reference: device-to-device copy (read + write bytes)
    torch_rates = [2.0 * nbytes / cuda_time(lambda: dst.copy_(src), launches=3) for _ in range(ctx.repeats)]
    torch_copy = float(np.median(torch_rates))
    result.references["torch_copy_bandwidth"] = torch_copy
    m = result.metrics["hbm_copy_bandwidth"]
    result.metrics["hbm_copy_bandwidth"] = Measurement(
        **{
            **m.__dict__,
            "settings": {**m.settings, "torch_copy_bandwidth": torch_copy},
            "note": m.note + f"; torch copy_ {torch_copy / 1e12:.2f} TB/s (read+write) in the same run",
        }
    )

    # read bandwidth against SMs
    counts = sorted({1, 2, 4, 8, 16, 24, 32, 48, 64, 80, 96, 112, ctx.sm_count})
    counts = [c for c in counts if c <= ctx.sm_count]
    if ctx.quick:
        counts = [c for c in counts if c in (1, 8, 32, 64, 96, ctx.sm_count)]
    curve = []
    for count in counts:
        s = Streamer(device, count, block=16384, warps=32)
        size = min(nbytes, max(64 << 20, int(nbytes * count / ctx.sm_count)))
        seconds, moved = s.read_seconds(src, size, launches=1)
        curve.append(moved / seconds)
    result.curves["hbm_read_bandwidth_vs_sms"] = Curve(
        name="hbm_read_bandwidth_vs_sms",
        x=np.array(counts, dtype=float),
        y=np.array(curve),
        x_unit="1",
        y_unit="B/s",
        method="hbm.read_cg_programs",
        x_label="programs (one 1024-thread program per SM)",
        y_label="HBM read bandwidth",
    )
    result.metrics["hbm_saturation_sms"] = Measurement.from_samples(
        "hbm_saturation_sms",
        [analysis.saturation_point(counts, curve, 0.9)],
        "1",
        "hbm.read_cg_programs",
        note="SMs (one 1024-thread program each) reaching 90% of the curve's best",
    )
    src = dst = None  # free 4 GiB before the latency ring
    torch.cuda.empty_cache()

    # latency on untouched lines
    ring = Ring(512 << 20, device, seed=2)
    hops = 2048 if ctx.quick else 8192
    samples = []
    for _ in range(ctx.repeats):
        flush_l2(ctx.l2_bytes or (50 << 20), device)
        total, _, _ = chase(ring, 0, hops, ctx.sm_count)
        if total is not None:
            samples.append(total / (hops // 4 * 4))
    if samples:
        result.metrics["hbm_latency"] = analysis.summarize(
            "hbm_latency",
            samples,
            "cycle",
            "hbm.chase_untouched",
            settings={"ring_bytes": 512 << 20, "hops": hops},
            cv_threshold=0.05,
            note="ld.global.cg pointer chase after an L2 flush, random lines of a 512 MiB ring (TLB misses included)",
        )
    return result
