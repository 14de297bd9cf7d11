"""A small typed view of the profile values the model uses, read once per (profile, dtype).

Every hardware number the model uses comes from here, and every one of them comes from the
profile.  Optional metrics that a profile lacks switch their term off (a missing latency is
no latency term) rather than being replaced by a guess about some GPU.

Model parameters (``MODEL_PARAMETERS``) are not hardware figures but named constants of the
model's structure; each is overridden by the profile metric of the same name (schema METRICS
``model_*``).  The code defaults are the fallback for profiles without them (datasheet profiles;
``Hardware.defaults_used`` names them).  ``python -m theodolite calibrate`` measures every parameter in
FITTED_PARAMETERS on the GPU at hand (method "calibration-probe": a targeted microbenchmark; "calibration-fit":
the fit on calibrate's own shape set; theodolite.probes.model_stage).  ``python -m theodolite.model.evaluate
RESULTS --fit ... --write-profile`` remains a research tool (method "model-fit", fitted on report suites: in-sample).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from theodolite.kernels.config import DTYPE_BYTES, DTYPE_THROUGHPUT_METRIC, SYNC_PATH_DTYPE, KernelLimits

from theodolite.errors import ProfileError
from theodolite.profile.schema import Profile

# name -> (default, meaning).  Structural constants of the model, GPU-independent by intent.
MODEL_PARAMETERS: dict[str, tuple[float, str]] = {
    "model_iteration_overhead": (
        500.0,
        "cycles of loop bookkeeping (barrier, pointer/descriptor update) per K-iteration of one program",
    ),
    "model_issue_rate": (4.0, "warp instructions an SM issues per cycle (schedulers per SM)"),
    "model_load_instructions": (
        3.0,
        "warp instructions per vector load of a pointer-based (non-TMA) kernel: address, load, store to smem",
    ),
    "model_latency_hiding": (
        0.5,
        "fraction of the (stages - 1) prefetched K-steps whose copy wait (memory latency plus the step's bytes at "
        "one SM's read ceiling) really overlaps the current one",
    ),
    "model_tma_latency_hiding": (
        1.0,
        "model_latency_hiding for TMA kernels: the share of their (stages - 1) prefetched K-steps whose copy wait "
        "overlaps the current one",
    ),
    "model_mma_instruction_overhead": (
        1.25,
        "cycles each matrix instruction costs beyond its FLOPs (issue, operand descriptors, synchronisation)",
    ),
    "model_mma_max_n": (256.0, "widest N of one asynchronous matrix instruction"),
    "model_mma_min_m": (64.0, "tile rows below which the compiler uses the synchronous (per-warp) matrix path"),
    "model_mma_small_rate": (0.25, "matrix rate of the synchronous path relative to the profile's matrix rate"),
    "model_short_row_read_share": (
        1.0,
        "HBM read rate of an operand read along K in rows of 128 bytes or less a K-step (BLOCK_K x element size), as a "
        "share of the rate of 256-byte rows: each step opens every row's DRAM page again for a shorter segment",
    ),
    "model_launch_extra": (
        6.25e-7,
        "seconds a kernel launch of our launcher costs beyond the profile's launch cost (launch_seconds)",
    ),
    "model_tma_launch_extra": (1.28e-6, "extra seconds of a TMA launch (device descriptors: allocator, scratch)"),
    "model_tma_iteration_overhead": (
        0.0,
        "cycles a TMA kernel's K-iteration costs beyond the loop bookkeeping of pointer-based ones (the mbarrier "
        "arrive/expect and wait on the copies, not overlapped with the matrix instructions without warp "
        "specialization)",
    ),
    "model_composite_iteration_overhead": (
        0.0,
        "cycles a composite tile's K-iteration (two dots on one A tile, GemmConfig.block_n1) costs beyond a TMA "
        "iteration: the second dot's instructions and its wait before the next step's copies can be issued",
    ),
    "model_scalar_load_cost": (
        1.0,
        "issue cost of a scalar (misaligned-row) load relative to a vector load instruction",
    ),
    "model_scalar_k_load_share": (
        1.0,
        "cost of a scalar load of an operand whose rows run along K (A row-major, B column-major) relative to "
        "one whose rows run along M or N (fitted on row-major 'nn' sweeps only: 0.8-0.95 since B's element-wise "
        "loads run along its rows, kernels.epilogue.SCALAR_COALESCE, 0.08-0.2 before, when Triton laid them along K; "
        "other layouts are assumed to follow the rows' direction)",
    ),
    "model_scalar_round_trips": (
        1.0,
        "memory latencies a scalar-load build's K-iteration waits for at least (its loads, their store to "
        "shared memory and the barrier before the matrix instructions are one dependent chain; H200: ~2, "
        "experiments/elementwise_steps.py)",
    ),
    "model_narrow_copy_cycles": (
        0.0,
        "cycles an SM spends on each warp-wide asynchronous copy narrower than 16 bytes a thread (4- or 8-byte rows) "
        "beyond a vector load's issue: a narrow copy costs its instruction, not its bytes (experiments/"
        "narrow_steps.py: ~5 on the H200's sweeps; 0, no term, where not measured)",
    ),
    "model_scalar_loads_in_flight": (
        64.0,
        "scalar (misaligned-row) loads one thread keeps outstanding per K-iteration before waiting for them",
    ),
    "model_streamk_slowdown": (
        1.0,
        "time per K-iteration of a Stream-K tail slice relative to the data-parallel phase (the slices run in "
        "K lockstep and share their panels in L2 as the data-parallel tiles do)",
    ),
    "model_streamk_reduce_cost": (
        3.0,
        "time of a split Stream-K tail's fp32 partial traffic (each slice's partial stored, the slices' partials "
        "reloaded in row chunks) relative to moving the same bytes at the profile's per-SM bandwidth (forced-split "
        "experiment, experiments: 2.5 on the H100, 2.75 on the H200 at least RMS; the fallback 3.0 "
        "is the first runs' estimate)",
    ),
    "model_splitk_reduce_cost": (
        1.0,
        "time of a split-K tile's reduction (the last slice reads every slice's fp32 partial through its SM) relative "
        "to moving those bytes at the profile's per-SM bandwidth (1: at that bandwidth; a Stream-K tail's partials "
        "measured 2.5-2.75x, model_streamk_reduce_cost)",
    ),
    "model_l2_bandwidth_scale": (
        1.0,
        "L2 bandwidth the kernels' tile loads reach relative to the profile's l2_bandwidth probe (whole-line "
        "requests of neighbouring SMs for the same panels)",
    ),
    "model_hbm_bandwidth_scale": (
        1.0,
        "HBM read bandwidth the kernels' tile loads reach relative to the profile's hbm_read_bandwidth probe (a "
        "streaming read): the K-panels of the tiles in flight are row segments of 128-512 bytes a row stride apart, "
        "not one sequential stream (H100 exhaustive sweep, HBM-bound configs: predicted/measured 0.70 at 1.0, alike "
        "for 64-256 wide tiles and any concurrency; fitted on the calibration set it gave 0.69-0.72 on both GPUs but "
        "worse cross-validated picks, so it stays a structural 1.0: experiments/fit_cv.py level+prior+hbm)",
    ),
    "model_tma_stream_scale": (
        1.0,
        "one SM's streaming ceiling for TMA copies relative to its ceiling for pointer-based (cp.async) loads, the "
        "hbm_read_bandwidth_one_sm probe: the bulk copies of a TMA pipeline move a K-step's panels through one SM "
        "faster than its threads' loads do",
    ),
    "model_tma_l2_bandwidth_scale": (
        1.0,
        "L2 bandwidth a TMA kernel's bulk tensor copies reach relative to a pointer-based kernel's tile loads "
        "(model_l2_bandwidth_scale): a copy requests whole boxes from one thread instead of 16-byte pieces from "
        "every thread",
    ),
    "model_flatten_hiding": (
        0.5,
        "share of a work item's fixed cost (pipeline fill latency and tile overhead) that a flattened tile loop "
        "(GemmConfig.flatten) hides behind the previous item: its next loads are issued before its epilogue",
    ),
    "model_zero_fill_cycles": (
        0.0,
        "cycles a warp-wide masked cp.async (a zero-filled prologue copy of a loop shorter than its pipeline) "
        "occupies an SM, whatever its width, so narrow copies fill a stage slower (measured per GPU by "
        "experiments/zero_fill.py: H100 3.68, H200 3.74; 0, no term, where not measured)",
    ),
    "model_tile_overhead": (
        15.0,
        "cycles per output tile outside the K loop beyond memory latency (index math, accumulator init, "
        "register-to-memory conversion of the epilogue)",
    ),
}


# The parameters calibrate determines on each GPU (``python -m theodolite calibrate``: a probe each, or the fit on its
# calibration shape set; model.calibration_probes has the table of every parameter's fate); the rest of
# MODEL_PARAMETERS are structural constants.  A profile without them runs on the code defaults above, which
# Hardware.defaults_used names.
FITTED_PARAMETERS = (
    "model_launch_extra", "model_tma_launch_extra", "model_iteration_overhead", "model_tile_overhead",
    "model_zero_fill_cycles", "model_splitk_reduce_cost", "model_scalar_load_cost", "model_scalar_k_load_share",
    "model_scalar_round_trips", "model_latency_hiding", "model_tma_latency_hiding", "model_mma_small_rate",
    "model_l2_bandwidth_scale", "model_flatten_hiding", "model_streamk_reduce_cost",
    "model_composite_iteration_overhead", "model_tma_stream_scale", "model_narrow_copy_cycles",
    "model_short_row_read_share",
)  # fmt: skip


@dataclass(frozen=True)
class Hardware:
    """The profile's numbers for one dtype, in the units the model computes with."""

    sm_count: int
    warp_size: int
    clock_hz: float  # sustained clock under matrix load: every cycle count converts with this
    mma_flops_per_sm: float  # FLOP/s per SM for the dtype (dense matrix rate / SMs)
    element_bytes: int
    smem_per_sm: int
    smem_per_block: int
    regs_per_sm: int
    regs_per_thread_max: int
    max_threads_per_sm: int
    smem_bandwidth: float  # B/s per SM (inf: unknown, no term)
    l2_bandwidth: float  # B/s aggregate
    l2_effective_bytes: float
    l2_latency_s: float  # 0: unknown
    hbm_read_bandwidth: float
    hbm_write_bandwidth: float
    output_write_bandwidth: float  # B/s a GEMM output's tile pattern is written at (the tile-write probe; else write)
    hbm_copy_bandwidth: float  # bytes read plus written per second
    hbm_saturation_sms: float  # 0: unknown (saturates at any SM count)
    hbm_latency_s: float  # 0: unknown
    sm_bandwidth: float  # B/s an SM's share at saturation: HBM read bandwidth / saturating SMs (inf: unknown, no term)
    sm_stream_bandwidth: float  # B/s one SM streams alone, its copy path's ceiling (inf: unknown, no term)
    launch_s: float
    program_start_s: float
    iteration_overhead_s: float
    issue_rate: float  # warp instructions per second per SM
    load_instructions: float
    tile_overhead_s: float
    zero_fill_copy_s: float  # seconds one warp-wide masked cp.async takes (a zero-filled prologue copy)
    narrow_copy_s: float  # seconds an SM spends on a warp-wide narrow (4- or 8-byte) copy beyond its load issue
    flatten_hiding: float  # share of an item's fixed cost a flattened loop hides (items after a program's first)
    latency_hiding: float
    tma_latency_hiding: float
    launch_kernel_s: float  # one launch of our launcher: launch_seconds(profile) + model_launch_extra
    tma_launch_extra_s: float
    tma_iteration_overhead_s: float  # model_tma_iteration_overhead in seconds
    composite_iteration_overhead_s: float  # model_composite_iteration_overhead in seconds
    tma_l2_bandwidth_scale: float  # model_tma_l2_bandwidth_scale
    tma_stream_scale: float  # model_tma_stream_scale
    hbm_tile_bandwidth: float  # B/s the tile loads of all SMs reach: hbm_read_bandwidth x model_hbm_bandwidth_scale
    short_row_read_share: float  # model_short_row_read_share: K-major rows of <= SHORT_ROW_BYTES a step read slower
    scalar_vec: float  # effective bytes per load instruction of a misaligned operand whose rows run along M or N
    scalar_vec_k: float  # the same for a misaligned operand whose rows run along K
    scalar_in_flight: float  # scalar loads a thread keeps outstanding
    scalar_round_trips: float  # round trips a scalar-load iteration waits for at least
    mma_min_m: float
    mma_small_rate: float
    streamk_slowdown: float
    streamk_reduce_cost: float  # split Stream-K tail: partial traffic time relative to one SM's bandwidth
    splitk_reduce_cost: float  # split-K: the last slice's partial reads relative to one SM's bandwidth
    mma_instruction_s: float
    mma_max_n: float
    limits: KernelLimits
    defaults_used: tuple[str, ...] = ()  # fitted model parameters taken from the code defaults (no fit in profile)
    # share of hbm_read_bandwidth that a active SMs reach, index a = 0..sm_count (memory.read_shares); () where the
    # profile has no read-against-SMs curve: the linear ramp to hbm_saturation_sms instead
    hbm_read_share: tuple[float, ...] = ()
    # the synchronous path (tiles under mma_min_m rows) where the compiler converts the operands first
    # (kernels.config.SYNC_PATH_DTYPE): its per-SM rate and element size; 0: the dtype's own
    sync_flops_per_sm: float = 0.0
    sync_element_bytes: int = 0

    @property
    def per_sm_copy(self) -> float:
        return self.hbm_copy_bandwidth


_OVERRIDES: dict[str, float] = {}


def _parameter(profile: Profile, name: str) -> float:
    """A model parameter: an override (fitting), else the profile's value, else the default."""
    if name in _OVERRIDES:
        return _OVERRIDES[name]
    value = profile.get(name)
    return float(MODEL_PARAMETERS[name][0] if value is None else value)


def parameter_sources(profile: Profile) -> dict[str, str]:
    """Where each model parameter comes from: "override" (set_parameters), "profile" (a fit stored in the
    profile, method "model-fit") or "default" (the code's fallback below, fitted on the H100 bf16 sweep)."""
    return {
        name: "override" if name in _OVERRIDES else ("profile" if profile.get(name) is not None else "default")
        for name in MODEL_PARAMETERS
    }


def defaults_used(profile: Profile) -> tuple[str, ...]:
    """The fitted model parameters this profile lacks, so the code defaults stand in (datasheet profiles).
    The structural constants (issue rate, instruction widths) are not counted."""
    sources = parameter_sources(profile)
    return tuple(name for name in FITTED_PARAMETERS if sources[name] == "default")


def current_parameters(profile: Profile) -> dict[str, float]:
    """Every model parameter as the model would use it with this profile now."""
    return {name: _parameter(profile, name) for name in MODEL_PARAMETERS}


def reset_parameters() -> None:
    """Drop every override."""
    _OVERRIDES.clear()
    from theodolite.model.predict import clear_tables

    clear_tables()


def set_parameters(**values: float) -> None:
    """Override model parameters process-wide (fitting, experiments; adds to earlier overrides); clears caches."""
    unknown = set(values) - set(MODEL_PARAMETERS)
    if unknown:
        raise KeyError(f"unknown model parameter(s): {', '.join(sorted(unknown))}")
    _OVERRIDES.update({name: float(value) for name, value in values.items()})
    from theodolite.model.predict import clear_tables

    clear_tables()


def mma_throughput(profile: Profile, dtype: str) -> float:
    """Device-wide dense matrix rate for a dtype; bf16 falls back to fp16 (same units on every known part)."""
    metric = DTYPE_THROUGHPUT_METRIC[dtype]
    value = profile.get(metric)
    if value is None and dtype == "bf16":
        value = profile.get("mma_throughput_fp16")
    if value is None:
        raise ProfileError(f"{profile.origin}: profile has no {metric!r}, needed to model {dtype} GEMMs")
    return float(value)


def launch_seconds(profile: Profile) -> float:
    """What one launch costs the GPU: the profile's graph-replayed back-to-back figure (``launch_overhead_graph``),
    which kernel timings see (validate and do_bench keep the host ahead of the GPU), else, for profiles measured
    before it existed, the host-driven ``launch_overhead`` (predictions then carry the host's launch rate, ~20 us
    on our H100 host, on top of the GPU time; the ranks are the same)."""
    graph = profile.get("launch_overhead_graph")
    return float(graph if graph is not None else profile.value("launch_overhead"))


def read_shares(profile: Profile, sms: int) -> tuple[float, ...]:
    """The share of the HBM read bandwidth that 0..``sms`` active SMs reach, read off the profile's measured
    ``hbm_read_bandwidth_vs_sms`` curve (interpolated, relative to its best point; linear from no SM to its first
    point), or () where the profile lacks it.  The curve is concave: one SM alone streams at its own copy ceiling
    (H100: 93 GB/s), sixteen reach 44% of the best, so the linear ramp to the 90% point (hbm_saturation_sms) prices a
    kernel with few programs in flight (a skinny shape's few wide tiles) at ~60% of what its SMs read."""
    curve = profile.curves.get("hbm_read_bandwidth_vs_sms")
    if curve is None or len(curve.x) < 2:
        return ()
    x = np.concatenate(([0.0], np.asarray(curve.x, dtype=np.float64)))
    y = np.concatenate(([0.0], np.asarray(curve.y, dtype=np.float64)))
    best = float(np.max(y))
    if not best > 0:
        return ()
    # a running maximum: more SMs never read less (a noisy point past the knee does not make the model non-monotone)
    share = np.maximum.accumulate(np.interp(np.arange(sms + 1, dtype=np.float64), x, y) / best)
    return tuple(float(v) for v in np.minimum(share, 1.0))


def hardware(profile: Profile, dtype: str) -> Hardware:
    """Read the profile once for a dtype (cached by the caller per fingerprint)."""
    get = profile.get
    sms = int(profile.value("sm_count"))
    clock = float(profile.value("clock_sustained_matrix_hz"))
    hbm_read = float(profile.value("hbm_read_bandwidth"))
    smem_bw = get("smem_bandwidth_per_sm")
    near, far = get("l2_latency_near"), get("l2_latency_far")
    l2_latency = [x for x in (near, far) if x]
    limits = KernelLimits.from_profile(profile)
    saturation = float(get("hbm_saturation_sms") or 0.0)
    launch = launch_seconds(profile)
    return Hardware(
        sm_count=sms,
        warp_size=int(get("warp_size", 32) or 32),
        clock_hz=clock,
        mma_flops_per_sm=mma_throughput(profile, dtype) / sms,
        element_bytes=DTYPE_BYTES[dtype],
        smem_per_sm=int(get("smem_bytes_per_sm") or profile.value("smem_bytes_per_block")),
        smem_per_block=int(profile.value("smem_bytes_per_block")),
        regs_per_sm=int(profile.value("regs_per_sm")),
        regs_per_thread_max=limits.regs_per_thread_max,
        max_threads_per_sm=limits.max_threads_per_sm,
        smem_bandwidth=float(smem_bw) * clock if smem_bw else math.inf,
        l2_bandwidth=float(profile.value("l2_bandwidth")) * _parameter(profile, "model_l2_bandwidth_scale"),
        l2_effective_bytes=float(profile.value("l2_effective_bytes")),
        l2_latency_s=(sum(l2_latency) / len(l2_latency)) / clock if l2_latency else 0.0,
        hbm_read_bandwidth=hbm_read,
        hbm_write_bandwidth=float(get("hbm_write_bandwidth") or hbm_read),
        output_write_bandwidth=float(get("hbm_tile_write_bandwidth") or get("hbm_write_bandwidth") or hbm_read),
        hbm_copy_bandwidth=float(get("hbm_copy_bandwidth") or hbm_read),
        hbm_saturation_sms=float(get("hbm_saturation_sms") or 0.0),
        hbm_latency_s=float(get("hbm_latency") or 0.0) / clock,
        sm_bandwidth=hbm_read / saturation if saturation else math.inf,
        sm_stream_bandwidth=float(get("hbm_read_bandwidth_one_sm") or math.inf),
        launch_s=launch,
        program_start_s=float(get("program_start_cost") or 0.0),
        iteration_overhead_s=_parameter(profile, "model_iteration_overhead") / clock,
        issue_rate=_parameter(profile, "model_issue_rate") * clock,
        load_instructions=_parameter(profile, "model_load_instructions"),
        tile_overhead_s=_parameter(profile, "model_tile_overhead") / clock,
        zero_fill_copy_s=_parameter(profile, "model_zero_fill_cycles") / clock,
        narrow_copy_s=_parameter(profile, "model_narrow_copy_cycles") / clock,
        flatten_hiding=_parameter(profile, "model_flatten_hiding"),
        latency_hiding=_parameter(profile, "model_latency_hiding"),
        tma_latency_hiding=_parameter(profile, "model_tma_latency_hiding"),
        launch_kernel_s=launch + _parameter(profile, "model_launch_extra"),
        tma_launch_extra_s=_parameter(profile, "model_tma_launch_extra"),
        tma_iteration_overhead_s=_parameter(profile, "model_tma_iteration_overhead") / clock,
        composite_iteration_overhead_s=_parameter(profile, "model_composite_iteration_overhead") / clock,
        tma_l2_bandwidth_scale=_parameter(profile, "model_tma_l2_bandwidth_scale"),
        tma_stream_scale=_parameter(profile, "model_tma_stream_scale"),
        hbm_tile_bandwidth=hbm_read * _parameter(profile, "model_hbm_bandwidth_scale"),
        short_row_read_share=_parameter(profile, "model_short_row_read_share"),
        scalar_vec=DTYPE_BYTES[dtype] / _parameter(profile, "model_scalar_load_cost"),
        scalar_vec_k=DTYPE_BYTES[dtype]
        / (_parameter(profile, "model_scalar_load_cost") * _parameter(profile, "model_scalar_k_load_share")),
        scalar_in_flight=_parameter(profile, "model_scalar_loads_in_flight"),
        scalar_round_trips=_parameter(profile, "model_scalar_round_trips"),
        mma_min_m=_parameter(profile, "model_mma_min_m"),
        mma_small_rate=_parameter(profile, "model_mma_small_rate"),
        streamk_slowdown=_parameter(profile, "model_streamk_slowdown"),
        streamk_reduce_cost=_parameter(profile, "model_streamk_reduce_cost"),
        splitk_reduce_cost=_parameter(profile, "model_splitk_reduce_cost"),
        mma_instruction_s=_parameter(profile, "model_mma_instruction_overhead") / clock,
        mma_max_n=_parameter(profile, "model_mma_max_n"),
        limits=limits,
        defaults_used=defaults_used(profile),
        hbm_read_share=read_shares(profile, sms),
        sync_flops_per_sm=mma_throughput(profile, SYNC_PATH_DTYPE[dtype]) / sms if dtype in SYNC_PATH_DTYPE else 0.0,
        sync_element_bytes=DTYPE_BYTES[SYNC_PATH_DTYPE[dtype]] if dtype in SYNC_PATH_DTYPE else 0,
    )
