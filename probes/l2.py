"""L2: aggregate read bandwidth, bandwidth against SMs, hit latency near/far, effective capacity.

Bandwidth: repeated ``.cg`` reads of a working set by 4 programs per SM; the sweep of working-set
size gives the curve whose knee (analysis.knee) is the effective capacity.  The aggregate value is
taken at a quarter of the reported L2 size (well inside the plateau).

Latency: a random pointer ring of 4 MB; SM 0 walks it once (bringing the lines into L2), then SM 0
and SMs across the id range walk it again with per-hop timing.  The pooled per-hop latencies are
split into two classes (analysis.latency_classes): near (the partition the lines live in, as seen
from the SM) and far.  The per-hop timing overhead is removed by comparing SM 0's timed mean with
its untimed chase.
"""

from __future__ import annotations

import numpy as np
from theodolite.probes import analysis
from theodolite.probes.chase import Ring, chase, flush_l2
from theodolite.probes.common import ProbeContext, ProbeResult
from theodolite.probes.stream import Streamer

from theodolite.profile.schema import Curve, Measurement

RING_BYTES = 4 << 20


def run(ctx: ProbeContext) -> ProbeResult:
    import torch

    result = ProbeResult()
    device = f"cuda:{ctx.device}"
    l2 = ctx.l2_bytes or (50 << 20)
    top = 8 * l2
    x = torch.rand(top // 4, device=device)
    streamer = Streamer(device, ctx.sm_count * 4, block=1024, warps=8)
    target_bytes = 2e9 if not ctx.quick else 1e9

    def rate(nbytes: int, launches: int = 2) -> float:
        reps = max(1, int(target_bytes / nbytes))
        seconds, moved = streamer.read_seconds(x, nbytes, reps, launches=launches)
        return moved / seconds

    # aggregate bandwidth inside the plateau
    plateau_bytes = l2 // 4
    rate(plateau_bytes)
    result.metrics["l2_bandwidth"] = analysis.measure_with_retries(
        lambda: rate(plateau_bytes),
        "l2_bandwidth",
        "B/s",
        "l2.read_cg",
        repeats=ctx.repeats,
        retries=ctx.retries,
        cv_threshold=ctx.cv_threshold,
        settings={"working_set_bytes": plateau_bytes, "programs": streamer.programs, "block": streamer.block},
    )

    # working-set sweep and its knee
    # the same sizes in a quick run (fewer samples per size, not a coarser grid: the knee is interpolated between
    # neighbouring sizes, and 14 points put a quick H200's knee at 61 MiB against 53 MiB from 24)
    points, samples = 24, (1 if ctx.quick else 3)
    sizes = np.unique(np.geomspace(4 << 20, top, points) // (streamer.programs * 4096) * streamer.programs * 4096)
    sizes = sizes[sizes > 0].astype(np.int64)
    bandwidth = np.array([np.median([rate(int(s), 1) for _ in range(samples)]) for s in sizes])
    result.curves["l2_bandwidth_vs_working_set"] = Curve(
        name="l2_bandwidth_vs_working_set",
        x=sizes.astype(float),
        y=bandwidth,
        x_unit="B",
        y_unit="B/s",
        method="l2.read_cg_sweep",
        x_label="working set",
        y_label="read bandwidth",
        attrs={"l2_bytes_driver": l2},
    )
    try:
        knee = analysis.knee(sizes, bandwidth)
        result.metrics["l2_effective_bytes"] = Measurement.from_samples(
            "l2_effective_bytes",
            [knee],
            "B",
            "l2.knee_of_sweep",
            settings={"l2_bytes_driver": l2, "rule": "half-way from plateau to tail, log-interpolated"},
            note=f"knee at {knee / 2**20:.1f} MiB vs driver L2 {l2 / 2**20:.1f} MiB",
        )
    except ValueError as error:
        result.metrics["l2_effective_bytes"] = Measurement.from_samples(
            "l2_effective_bytes", [l2], "B", "l2.driver_fallback", note=f"no knee found ({error}); driver size"
        )
        result.metrics["l2_effective_bytes"] = Measurement(
            **{**result.metrics["l2_effective_bytes"].__dict__, "flagged": True}
        )

    # bandwidth against SMs (one program per SM)
    counts = sorted({1, 2, 4, 8, 16, 32, 48, 64, 96, ctx.sm_count // 2, ctx.sm_count})
    counts = [c for c in counts if 0 < c <= ctx.sm_count]
    per_sm = []
    for count in counts:
        s = Streamer(device, count, block=4096, warps=16)
        nbytes = plateau_bytes
        reps = max(1, int(0.3e9 * count / ctx.sm_count / nbytes) + 1)
        seconds, moved = s.read_seconds(x, nbytes, reps, launches=1)
        per_sm.append(moved / seconds)
    result.curves["l2_bandwidth_vs_sms"] = Curve(
        name="l2_bandwidth_vs_sms",
        x=np.array(counts, dtype=float),
        y=np.array(per_sm),
        x_unit="1",
        y_unit="B/s",
        method="l2.read_cg_programs",
        x_label="programs (one per SM)",
        y_label="L2 read bandwidth",
        attrs={"working_set_bytes": plateau_bytes},
    )
    x = x.new_empty(0)  # free the sweep buffer (the closures above keep a reference to the name)

    # latency: near and far classes
    ring = Ring(RING_BYTES, device, seed=1)
    flush_l2(l2, device)
    hops = 1024 if ctx.quick else 4096
    total, _, ran = chase(ring, 0, ring.lines, ctx.sm_count)  # SM 0 brings the lines in
    untimed, _, _ = chase(ring, 0, hops, ctx.sm_count)
    per_hop_untimed = (untimed or 0.0) / (hops // 4 * 4)
    _, own, _ = chase(ring, 0, hops, ctx.sm_count, timed=True)
    step = max(1, ctx.sm_count // (4 if ctx.quick else 8))
    pooled: list[np.ndarray] = []
    per_sm_mean: dict[int, float] = {}
    for sm in range(0, ctx.sm_count, step):
        _, hop_cycles, ran_on = chase(ring, sm, hops, ctx.sm_count, timed=True)
        if hop_cycles is None:
            continue
        pooled.append(hop_cycles)
        per_sm_mean[ran_on] = float(np.mean(hop_cycles))
    offset = float(np.median(own)) - per_hop_untimed if own is not None else 0.0
    values = np.concatenate(pooled) if pooled else np.array([per_hop_untimed])
    classes = analysis.latency_classes(values)
    settings = {
        "ring_bytes": RING_BYTES,
        "hops": hops,
        "sms": str(sorted(per_sm_mean)),
        "timing_overhead_cycles": offset,
        "far_share": classes.far_share,
        "untimed_sm0_cycles_per_hop": per_hop_untimed,
    }
    if not per_hop_untimed > 0 or not 0 <= offset < float(np.median(values)):
        offset = 0.0  # no trustworthy untimed reference: keep the timed values (overhead included)
        settings["timing_overhead_cycles"] = "not removed"
    near_samples = values[values < classes.threshold] - offset if classes.separated else values - offset
    far_samples = values[values >= classes.threshold] - offset if classes.separated else values - offset
    result.metrics["l2_latency_near"] = Measurement.from_samples(
        "l2_latency_near",
        [float(np.median(near_samples))],
        "cycle",
        "l2.chase_smid_classes",
        settings=settings,
        note="median of the near class of per-hop latencies pooled over SMs, timing overhead removed",
    )
    result.metrics["l2_latency_far"] = Measurement.from_samples(
        "l2_latency_far",
        [float(np.median(far_samples))],
        "cycle",
        "l2.chase_smid_classes",
        settings=settings,
        note=("median of the far class" if classes.separated else "no second class found: far = near"),
    )
    result.metrics["l2_partitions"] = Measurement.from_samples(
        "l2_partitions",
        [2.0 if classes.separated else 1.0],
        "1",
        "l2.chase_smid_classes",
        note="latency classes seen over SMs (2 = near/far partitions)",
    )
    result.curves["l2_latency_per_sm"] = Curve(
        name="l2_latency_per_sm",
        x=np.array(sorted(per_sm_mean), dtype=float),
        y=np.array([per_sm_mean[k] - offset for k in sorted(per_sm_mean)]),
        x_unit="1",
        y_unit="cycle",
        method="l2.chase_smid",
        x_label="%smid",
        y_label="mean L2 hit latency",
    )
    hist, edges = np.histogram(values - offset, bins=64)
    result.curves["l2_latency_histogram"] = Curve(
        name="l2_latency_histogram",
        x=0.5 * (edges[:-1] + edges[1:]),
        y=hist.astype(float),
        x_unit="cycle",
        y_unit="1",
        method="l2.chase_smid",
        x_label="per-hop latency",
        y_label="hops",
    )
    result.diagnostics["l2_latency"] = {
        "near": classes.near - offset,
        "far": classes.far - offset,
        "share": classes.far_share,
        "separated": classes.separated,
        "offset": offset,
        "untimed": per_hop_untimed,
        "warm_total": total,
        "warm_sm": ran,
        "per_sm_mean": per_sm_mean,
    }
    return result
