"""HBM: read, write and copy bandwidth; a GEMM output's tile-by-tile writes; SMs to saturate reads; latency beyond
every cache.

Bandwidth over 2 GiB buffers (far beyond L2): a few stream kernels (persistent, 8 programs per SM;
one program per block with several block sizes and cache hints) are tried and the fastest is
measured; copy counts bytes read plus written and is checked against torch's device-to-device
copy timed in the same run.  Latency: a
random pointer ring over 512 MiB, linked, then L2 flushed (the linking writes are partial lines),
then one untimed chase of lines this run has not touched since the flush.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence

import numpy as np
from theodolite.probes import analysis
from theodolite.probes.chase import Ring, chase, flush_l2
from theodolite.probes.common import ProbeContext, ProbeResult, cuda_time
from theodolite.probes.stream import Streamer, StreamVariant, TileWrite, stream_bytes, stream_rate, tile_write_rate

from theodolite.profile.schema import Curve, Measurement

# Candidates tried for each stream kind; the fastest (median of a few samples) is then measured.
# The persistent kernels are the original method (8 programs per SM, a fixed share each); the
# flat kernels launch one program per block (8 to 64 floats = 2 to 16 16-byte loads per thread in
# flight) with L1-bypassing loads, L2 evict-first hints or streaming stores.
_PERSISTENT = StreamVariant(flat=False, block=4096, warps=8, per_sm=8)
CANDIDATES: dict[str, tuple[StreamVariant, ...]] = {
    "copy": (
        _PERSISTENT,
        StreamVariant(flat=False, block=4096, warps=8, per_sm=8, interleaved=True),
        StreamVariant(block=1024, warps=4),  # H200 sweep: 0.995x torch copy_ (b2048: 0.955x)
        StreamVariant(block=2048, warps=4),
        StreamVariant(block=4096, warps=4),
        StreamVariant(block=4096, warps=8),
        StreamVariant(block=8192, warps=8),
        StreamVariant(block=4096, warps=4, store_cm=".cs"),
        StreamVariant(block=8192, warps=8, store_cm=".cs"),
        StreamVariant(block=4096, warps=4, load_cm="", evict="evict_first"),
        StreamVariant(block=8192, warps=8, load_cm="", evict="evict_first"),
    ),
    "read": (
        _PERSISTENT,
        StreamVariant(block=1024, warps=4),
        StreamVariant(block=2048, warps=4),
        StreamVariant(block=4096, warps=4),
        StreamVariant(block=8192, warps=8),
        StreamVariant(block=4096, warps=4, load_cm="", evict="evict_first"),
        StreamVariant(block=8192, warps=8, load_cm="", evict="evict_first"),
    ),
    "write": (
        _PERSISTENT,
        StreamVariant(block=1024, warps=4, load_cm=""),
        StreamVariant(block=2048, warps=4, load_cm=""),
        StreamVariant(block=4096, warps=4, load_cm=""),
        StreamVariant(block=8192, warps=8, load_cm=""),
        StreamVariant(block=4096, warps=4, load_cm="", store_cm=".cs"),
        StreamVariant(block=8192, warps=8, load_cm="", evict="evict_first"),
    ),
}
# --quick: the persistent kernel (chunked) and the plain flat ones (no hint variants)
QUICK_CANDIDATES = {
    kind: tuple(v for v in variants if not v.interleaved and v.store_cm == "" and v.evict == "")[:4]
    for kind, variants in CANDIDATES.items()
}


def pick_variant(
    rate: Callable[[StreamVariant], float], candidates: Sequence[StreamVariant], samples: int = 3
) -> tuple[StreamVariant, dict[str, float], dict[str, str]]:
    """(fastest candidate by median rate, rates by key, failures by key).  A candidate that fails to
    compile or run is skipped; the first one is the fallback when all fail (its error then surfaces)."""
    rates: dict[str, float] = {}
    failures: dict[str, str] = {}
    best: StreamVariant | None = None
    for variant in candidates:
        try:
            rate(variant)  # compile and warm
            value = float(np.median([rate(variant) for _ in range(samples)]))
        except Exception as error:  # an optimisation that does not build here is skipped
            failures[variant.key] = f"{type(error).__name__}: {error}"[:200]
            continue
        rates[variant.key] = value
        if best is None or value > rates[best.key]:
            best = variant
    return (best if best is not None else candidates[0]), rates, failures


def run(ctx: ProbeContext) -> ProbeResult:
    import torch

    result = ProbeResult()
    device = f"cuda:{ctx.device}"
    nbytes = (1 << 30) if ctx.quick else (2 << 30)
    src = torch.rand(nbytes // 4, device=device)
    dst = torch.empty_like(src)
    sink = torch.zeros(ctx.sm_count * 8 * 4096 + 65536, dtype=torch.float32, device=device)
    candidates = QUICK_CANDIDATES if ctx.quick else CANDIDATES

    def rate_of(kind: str, variant: StreamVariant) -> float:
        target = dst if kind == "write" else src
        return stream_rate(kind, variant, ctx.sm_count, target, dst, sink, nbytes)

    for kind in ("read", "write", "copy"):
        variant, rates, failures = pick_variant(functools.partial(rate_of, kind), candidates[kind])
        if failures:
            result.diagnostics[f"hbm_{kind}_variant_failures"] = failures
        result.diagnostics[f"hbm_{kind}_variant_rates"] = rates
        settings = {
            "bytes": stream_bytes(variant, nbytes, ctx.sm_count),
            "variant": variant.key,
            "block": variant.block,
            "num_warps": variant.warps,
            "variant_rates": str({key: round(value / 1e9, 1) for key, value in rates.items()}) + " GB/s",
        }
        if not variant.flat:
            settings["programs"] = ctx.sm_count * variant.per_sm
        result.metrics[f"hbm_{kind}_bandwidth"] = analysis.measure_with_retries(
            lambda kind=kind, variant=variant: rate_of(kind, variant),
            f"hbm_{kind}_bandwidth",
            "B/s",
            {"read": "hbm.read_cg", "write": "hbm.write", "copy": "hbm.copy"}[kind],
            repeats=ctx.repeats,
            retries=ctx.retries,
            cv_threshold=ctx.cv_threshold,
            settings=settings,
            method_version="2",
            note=f"{variant.key}, fastest of {len(rates)} stream variants"
            + ("; bytes read plus written" if kind == "copy" else ""),
        )

    # torch reference: device-to-device copy (read + write bytes), right after our copy
    torch_rates = [2.0 * nbytes / cuda_time(lambda: dst.copy_(src), launches=3) for _ in range(ctx.repeats)]
    torch_copy = float(np.median(torch_rates))
    result.references["torch_copy_bandwidth"] = torch_copy
    m = result.metrics["hbm_copy_bandwidth"]
    result.metrics["hbm_copy_bandwidth"] = Measurement(
        **{
            **m.__dict__,
            "settings": {**m.settings, "torch_copy_bandwidth": torch_copy, "ratio_to_torch": m.value / torch_copy},
            "note": m.note + f"; torch copy_ {torch_copy / 1e12:.2f} TB/s (read+write) in the same run",
        }
    )

    tile_write(ctx, src, result)

    # read bandwidth against SMs: the whole grid in every mode (a sweep costs milliseconds), SATURATION_SWEEPS
    # interleaved sweeps (a disturbance hits one sweep, not one point's every sample), the per-point median kept
    counts = [c for c in sorted({1, 2, 4, 8, 16, 24, 32, 48, 64, 80, 96, 112, ctx.sm_count}) if c <= ctx.sm_count]
    streamers = {count: Streamer(device, count, block=16384, warps=32) for count in counts}
    sweeps = np.empty((SATURATION_SWEEPS, len(counts)))
    if sweep_buffer_bytes(nbytes) > nbytes:  # a quick run sweeps the full run's bytes too (contents never read back)
        dst = src = src.new_empty(0)
        src = torch.empty(sweep_buffer_bytes(nbytes) // 4, device=device)
    for sweep in range(SATURATION_SWEEPS):
        for index, count in enumerate(counts):
            size = sweep_point_bytes(count, ctx.sm_count, src.numel() * src.element_size())
            seconds, moved = streamers[count].read_seconds(src, size, launches=1)
            sweeps[sweep, index] = moved / seconds
    result.curves["hbm_read_bandwidth_vs_sms"] = sms_curve(np.array(counts, dtype=float), sweeps)
    result.metrics["hbm_saturation_sms"] = saturation_measurement(result.curves["hbm_read_bandwidth_vs_sms"])
    result.metrics["hbm_read_bandwidth_one_sm"] = one_sm_bandwidth(result.curves["hbm_read_bandwidth_vs_sms"])
    src = dst = src.new_empty(0)  # free 4 GiB before the latency ring
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


TILE_WRITE_SHAPE = (16384, 32768)  # 1 GiB of 2-byte outputs (a quick run: half the rows)


def tile_write(ctx: ProbeContext, buffer, result: ProbeResult) -> None:
    """``hbm_tile_write_bandwidth``: a GEMM output's write pattern alone (``stream.tile_write_kernel``: 128x256 tiles
    of 2-byte elements in grouped order over a 1 GiB matrix, in ``buffer``'s memory).  A build or launch that fails
    is recorded as unsupported; the other HBM metrics stand."""
    import torch

    rows, cols = TILE_WRITE_SHAPE
    rows = rows // 2 if ctx.quick else rows
    variant = TileWrite()
    try:
        out = buffer[: rows * cols // 2].view(torch.float16).view(rows, cols)
        tile_write_rate(out, variant)  # compile and warm
        result.metrics["hbm_tile_write_bandwidth"] = analysis.measure_with_retries(
            lambda: tile_write_rate(out, variant),
            "hbm_tile_write_bandwidth",
            "B/s",
            "hbm.tile_write",
            repeats=ctx.repeats,
            retries=ctx.retries,
            cv_threshold=ctx.cv_threshold,
            settings={"rows": rows, "cols": cols, "element_bytes": 2, "variant": variant.key},
            note=f"{variant.key}: a GEMM output's stores alone (tile rows a row pitch apart, grouped tile order)",
        )
    except Exception as error:  # a build or launch this GPU refuses: say so, keep the rest of the probe
        result.unsupported["hbm_tile_write_bandwidth"] = f"{type(error).__name__}: {error}"[:200]


# Sweeps of the read-bandwidth-against-SMs curve: one sweep's point varies by ~0.5% (what the spread of the H200's
# quick values implies), which moved the old interpolated 90% crossing by ~3% (up to 11% on a quick run's six
# points); the fit of the median of 7 sweeps moves by ~0.7% at that noise (tests/probes/test_saturation_fit.py).
# A sweep of 13 points takes a few milliseconds.
SATURATION_SWEEPS = 7
SATURATION_FRACTION = 0.9

# bytes one sweep point reads at all SMs, scaled down with the SM count, from a buffer of SWEEP_BYTES in quick and full
# runs alike, so both read the same curve.  When the bytes scaled with the run's buffer, a quick run's points from 8
# SMs up read half a full run's, and its 90% point came out 7-8% higher on each of two H100s, every round (57 against
# 53 SMs, fleet/node_bar.py); when only the points above half the SMs were capped by the quick run's 1 GiB buffer,
# its plateau read 1-3% lower and its 90% point 4-6% lower on each of four H100s and two H200s (50.9 against 53.2).
SWEEP_BYTES = 2 << 30
SWEEP_MIN_BYTES = 64 << 20  # the fewest bytes a point reads: ~0.7 ms at one SM's ~90 GB/s, long against a launch


def sweep_buffer_bytes(run_bytes: int) -> int:
    """The buffer the saturation sweep reads: the run's stream buffer, or ``SWEEP_BYTES`` where that is smaller."""
    return max(run_bytes, SWEEP_BYTES)


def sweep_point_bytes(count: int, sm_count: int, buffer_bytes: int) -> int:
    """Bytes the saturation sweep reads at ``count`` SMs: ``SWEEP_BYTES`` scaled by the SM share, at least
    ``SWEEP_MIN_BYTES``, at most the buffer (which caps only the points above its share of ``SWEEP_BYTES``)."""
    return min(buffer_bytes, max(SWEEP_MIN_BYTES, int(SWEEP_BYTES * count / sm_count)))


def sms_curve(counts: np.ndarray, sweeps: np.ndarray) -> Curve:
    """The stored curve: per-point median of the sweeps, with their min and max as the band."""
    return Curve(
        name="hbm_read_bandwidth_vs_sms",
        x=counts,
        y=np.median(sweeps, axis=0),
        x_unit="1",
        y_unit="B/s",
        method="hbm.read_cg_programs",
        x_label="programs (one 1024-thread program per SM)",
        y_label="HBM read bandwidth",
        y_low=np.min(sweeps, axis=0),
        y_high=np.max(sweeps, axis=0),
        attrs={"sweeps": int(sweeps.shape[0]), "point": "median of the sweeps", "sweep_values": sweeps.tolist()},
    )


def saturation_measurement(curve: Curve) -> Measurement:
    """``hbm_saturation_sms`` from the stored curve alone (so a stored profile can be re-derived on a CPU): the value
    is the fitted curve's 90% point on the (median) curve; the samples, and so the spread the guard judges, are the
    same point fitted on each sweep (``attrs["sweep_values"]``).  A curve stored without its sweeps (profiles made
    before they were kept: one sweep) gives its one value as the only sample."""
    raw = curve.attrs.get("sweep_values")
    sweeps = None if raw is None else np.asarray(raw, dtype=np.float64)
    try:
        fit = analysis.saturation_fit(curve.x, curve.y, SATURATION_FRACTION)
    except ValueError as error:  # too few points (a GPU with few SMs) or no saturation: the interpolated crossing
        return Measurement.from_samples(
            "hbm_saturation_sms",
            [analysis.saturation_point(curve.x, curve.y, SATURATION_FRACTION)],
            "1",
            "hbm.read_cg_programs",
            settings={"derivation": "saturation_point"},
            note=f"SMs reaching 90% of the curve's best, interpolated (no fit: {error})",
        )
    samples = [fit.point]
    if sweeps is not None and len(sweeps) > 1:
        samples = []
        for row in np.asarray(sweeps, dtype=np.float64):
            try:
                samples.append(analysis.saturation_fit(curve.x, row, SATURATION_FRACTION).point)
            except ValueError:  # one sweep that does not fit leaves a gap in the spread, not in the value
                continue
        samples = samples or [fit.point]
    measurement = Measurement.from_samples(
        "hbm_saturation_sms",
        samples,
        "1",
        "hbm.read_cg_programs",
        method_version="2",
        settings={
            "derivation": "saturation_fit",
            "fraction": SATURATION_FRACTION,
            "fit_plateau": fit.plateau,
            "fit_rate": fit.rate,
            "fit_exponent": fit.exponent,
            "fit_sharpness": fit.sharpness,
            "fit_residual": fit.residual,
            "sweeps": 1 if sweeps is None else int(len(sweeps)),
        },
        note="SMs (one 1024-thread program each) at which the fitted saturating curve reaches 90% of its value at "
        "all SMs" + ("" if sweeps is None else f"; spread: the same point fitted on each of {len(sweeps)} sweeps"),
    )
    flagged = measurement.flagged or fit.residual > analysis.SATURATION_FIT_RESIDUAL
    if fit.residual > analysis.SATURATION_FIT_RESIDUAL:
        note = measurement.note + f"; fit residual {100 * fit.residual:.1f}% RMS: the curve is not a plain saturation"
    else:
        note = measurement.note
    return dataclasses.replace(measurement, value=fit.point, flagged=flagged, note=note)


def one_sm_bandwidth(curve: Curve) -> Measurement:
    """The read rate one SM reaches on its own (its copy path's ceiling, which bounds a GEMM program's K-step),
    from the read-bandwidth-against-SMs curve: the per-SM rates of its points below half the best, where the
    SMs do not yet share the memory system (H100: 93 down to 84 GB/s from 1 to 16 SMs, median 90)."""
    return Measurement.from_samples(
        "hbm_read_bandwidth_one_sm",
        analysis.unshared_rates(curve.x, curve.y, 0.5),
        "B/s",
        curve.method,
        note="per-SM read rate of the hbm_read_bandwidth_vs_sms points below half the best (SMs not sharing)",
    )
