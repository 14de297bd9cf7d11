"""Targeted microbenchmarks of the bundled kernels, one model parameter each, and the fate of every parameter.

A probe is a handful of (shape, config) timings chosen so that one term of the model dominates what differs
between them; calibrate times them on the GPU at hand and solves the model for that one parameter
(``calibration_fit.fit`` with one name), in the order below, each with the ones before it fixed.  What cannot be
isolated this way is fitted on the calibration shape set (``calibration_shapes``), and what neither determines is
a structural constant of the model (its code default), not a GPU fact.

=====================================  ============  =================================================================
parameter                              fate          how
=====================================  ============  =================================================================
model_launch_extra                     probe         tiny one-tile GEMMs, pointer-based configs, graph-replayed
model_tma_launch_extra                 probe         the same tiny GEMMs with TMA configs (after the launch above)
model_iteration_overhead               probe         one wave of 128x256 tiles, K 4096 -> 16384: the K-step slope
model_latency_hiding                   probe         8 and 64 tiles of 64x64 at 4 and 8 stages, K grown: the slopes
model_composite_iteration_overhead     probe         one wave of composite tiles (128x192, 128x320), same K: the slope
model_tma_latency_hiding               probe         8 and 64 tiles of TMA 64x128 at 4 and 8 stages, K grown: the
                                                     slopes (the stages probe's design through TMA copies)
model_mma_small_rate                   probe         one wave of 32x128 tiles (synchronous matrix path: < 64 rows), one
                                                     per SM, K grown: the slope of their compute-bound K-steps
model_tile_overhead                    probe         K of one step, many waves of tiles (a work item's fixed cost)
model_zero_fill_cycles                 probe         K of one step on 8- and 12-stage pipelines (zero-filled stages)
model_flatten_hiding                   probe         one or two K-steps, many waves of tiles: a flattened config beside
                                                     its plain twin (what the flat loop saves)
model_splitk_reduce_cost               probe         one wave of 16x64 split-K tiles, K grown with the split (4, 8, 16
                                                     slices of one or two K-steps each): what a slice's partial adds
model_narrow_copy_cycles               probe         a 64x128 output of 4-byte rows (layout nt, K = 2 mod 4, too small
                                                     to copy), K grown: the slope of two 64x64 tiles' narrow K-steps
model_scalar_round_trips               probe         an nn.Linear weight of odd K streamed at M = 8 (element-wise B rows
                                                     along K), few loads a thread, K grown: the slope
model_scalar_load_cost                 probe         misaligned N (element-wise B rows along N), no aligned copy
model_scalar_k_load_share              probe         misaligned K (element-wise A rows along K), no aligned copy
model_short_row_read_share             probe (floor) a weight stream (M = 8, nt, 64x64 tiles over two and four waves,
                                                     HBM-bound) read in rows of BLOCK_K 64 (128 B) and 128 (256 B),
                                                     the same shared memory: the long rows' time over the short rows'
                                                     (short_row_share)
model_l2_bandwidth_scale               probe (floor) K-panel bytes per measured K-step of one wave over long K, the
                                                     iteration probe's 128x256 tiles and the l2-floor probe's TMA
                                                     128x128 ones: the highest L2 rate tile loads reach
                                                     (l2_scale_floor)
model_streamk_reduce_cost              fit           calibration set: Stream-K tail partial traffic
model_streamk_slowdown                 structure     1: tail slices run in K lockstep (both GPUs' fits stayed at 1)
model_scalar_loads_in_flight           structure     64: outstanding element-wise loads per thread
model_mma_instruction_overhead         structure     1.25: no fit ever moved it from its default
model_hbm_bandwidth_scale              structure     1: tile loads read HBM at hbm_read_bandwidth (fitted, both GPUs
                                                     gave 0.69-0.72 and the cross-validated picks got worse:
                                                     experiments/fit_cv.py variant level+prior+hbm)
model_tma_iteration_overhead           structure     0: TMA K-steps cost what pointer-based ones do (fits gave 1-3
                                                     cycles, below what the calibration set resolves: it hit its bound)
model_tma_l2_bandwidth_scale           structure     1: TMA copies reach the L2 rate pointer-based loads do (H100: the
                                                     composite-step probe's 128x192 TMA tiles read 0.97x the iteration
                                                     probe's floor; fitted it swung 1.0 -> 1.48 between two runs)
model_issue_rate, model_load_instructions, model_mma_max_n, model_mma_min_m: structure (instruction widths and
counts of the kernels' code, not GPU figures)
=====================================  ============  =================================================================
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from theodolite.kernels.config import DTYPE_BYTES, GemmConfig

from theodolite.profile.schema import Profile

if TYPE_CHECKING:
    from theodolite.model.calibration_fit import Timing

# calibration-fit parameters: fitted together on the calibration shape set
FIT_PARAMETERS = ("model_streamk_reduce_cost",)
# measured from probes' timings without a solve: the L2 scale at the one-wave probes' floor (l2_scale_floor).  Fitted
# on the calibration set it swung 0.55 -> 1.0 -> 0.62 between runs (its prior weight chosen anew each time) while the
# probe's one wave of 128x256 tiles runs at 1.24x the l2_bandwidth probe's rate: below that the model prices those
# compute-bound steps L2-bound at twice their time
FLOOR_PARAMETERS = ("model_l2_bandwidth_scale", "model_tma_stream_scale", "model_short_row_read_share")
# composite tiles' K-step: a probe since 2026-11-28.  Solved on the calibration shapes that timed a composite tile it
# rested on a handful of timings (H100: 5 of 311, 61 +- 41 cycles, flagged) where the composite is one candidate among
# many; one wave of composite tiles over long K measures it where it binds (compute-bound steps)
# the L2 floor's own probe since 2026-11-28: one wave of TMA 128x128 tiles over long K asks the L2 for a third more
# bytes per matrix instruction than the iteration probe's 128x256 tiles, so its K-steps run at the rate the tile loads
# reach rather than at the matrix rate.  From the iteration probe alone the H200's floor read 1.08x the l2_bandwidth
# probe, while one wave of these tiles (llm.csv's 512x4096x14336, nt) ran its K-steps at 1.36x it, at one SM's
# streaming ceiling: the model priced them L2-bound, 101 us against 80 measured, and took Stream-K 128x256 at 0.82
L2_FLOOR_KEYS = ("tma/128x128x64/g8/w8/s4/k1",)
COMPOSITE_STEP_KEYS = ("tma/128x128+64x64/g8/w8/s5/k1", "tma/128x256+64x64/g8/w8/s3/k1")
# TMA pipelines' latency share and the flat loop's hidden share: probes since 2026-11-28.  Fitted on the H200's 46
# calibration shapes with the L2 floor above they went to 0.73 and 0.01 (a bound), the seen sweeps' picks 0.004-0.018
# lower than at their priors (1.0, 0.5): the set does not determine them.  The TMA share is the stages probe's design
# through TMA copies (tiles of 64x128: the 64x64 TMA tile's pipeline has no 8-stage build in the space); the flat share
# a flattened config beside its plain twin on short K over many waves, their difference what the flat loop hides
TMA_STAGE_KEYS = ("tma/64x128x64/g8/w4/s4/k1", "tma/64x128x64/g8/w4/s8/k1")
# The twins must hold as many programs per SM as each other: the plain 128x128x64 w8 s3 build fits two where its
# flattened one fits one, so that pair's difference measured residency, not the loop (H200: 26.2 us plain against
# 22.4 flattened; with that pair the probe's solve left log-RMS 3.6, 0.58 once an SM's resident programs take their
# items' fixed work in turn (core.cost), and 0.05 without it)
FLAT_KEYS = ("persistent/64x64x128/g8/w4/s4/k1", "persistent/64x64x128/g8/w4/s4/k1/f")
# pointer-based pipelines' latency share: a probe since 2026-11-28.  Fitted on the calibration set it sat at its prior
# (0.5 on the H100: the set does not determine it), while a stage series of 64x64 tiles with the L2 idle (8-256 tiles,
# 3-12 stages, K 4096 and 16384; experiments/stage_series.py) reads 0.67-0.74 whichever of its shapes and stage
# counts are fitted; two stage counts on 8 and 64 tiles over long K measure it where the copies' latency binds
STAGE_KEYS = ("persistent/64x64x64/g8/w4/s4/k1", "persistent/64x64x64/g8/w4/s8/k1")
# split-K's reduction: a probe of split pairs since 2026-11-28.  Solved on the level of deep splits (32 and 64 slices
# of a skinny shape, many waves) it read 4.9 on the H100: the level carried every other error of those many-wave
# shapes, and the model priced 4-16 slices of small tiles 1-3 us above their timings (wide:300:682849, H100: 1x64x3712
# split 8 ways predicted 7.1 us, measured 4.6).  Pairs of splits whose slices run the same K-steps differ by the
# partials alone
# the synchronous K-step's chain: a probe since 2026-11-29.  At M 8 and 64 an element-wise B K-step (odd K, layout nt)
# took ~0.8 us plus ~0.012 us per load a thread on the H200 (experiments/elementwise_steps.py), the chain twice the
# profile's HBM latency; with one latency per step (the structure before) the scalar probe's level solve put the rest
# on each load (model_scalar_load_cost 8.7), and the model ranked BLOCK_K 16-32 ahead of 128, the reverse of the
# measured order.  Few loads a thread (16x64x16: 8) leave the chain's latencies what the step measures
SCALAR_CHAIN_KEYS = ("persistent/16x64x16/g8/w4/s2/k1",)
# a narrow copy's cost: a probe since 2026-11-29.  Over the seen H200 sweeps a 4- or 8-byte copy's K-step ran ~3 ns
# per warp-wide copy beyond the model's price at 9 K-steps or more, linear in the copies an SM issues
# (experiments/narrow_steps.py), where aligned steps matched; an output too small to copy its operands aligned keeps
# them narrow, and one program per SM over long K leaves the copies what a K-step measures
NARROW_KEYS = ("persistent/64x64x64/g8/w4/s4/k1",)
# the synchronous path's matrix rate: a probe since 2026-11-29.  Fitted on the calibration set it stayed at its prior
# (0.25) on both GPUs, the cross-validation finding the set's picks tied (its 57 H200 shapes: 0.2499 +- 4e-05), while
# the H200's earlier 39 shapes had given 0.18 and the seen sweeps' small-M picks follow it (fp8 decode 0.966 at 0.25,
# 0.974 at 0.18).  A 32-row tile reads 26 flops a byte, twice a 16-row one: at these rates its K-step is bound by its
# matrix instructions, not by its copies' latency or one SM's read ceiling (up to ~0.3 of the matrix rate on the
# H100 and H200, where the latency takes over and the slope bounds the rate from below only)
SYNC_RATE_KEYS = ("persistent/32x128x64/g8/w4/s4/k1",)
# the read rate of short rows along K: a probe since 2026-11-29.  On the H200's HBM-bound nt weight streams configs
# whose B rows are 128-byte segments a K-step (BLOCK_K 64) ran 1.04-1.09x the model's time, those of 256 bytes and more
# 1.00-1.01x (experiments/segment_rates.py), where the model priced a stream by its bytes alone.  Two configs of the
# space that differ only in BLOCK_K, with the same shared memory (twelve stages of 64 against six of 128: one program
# an SM, 176 and 160 KB in flight) on HBM-bound waves: their times' ratio is the share (short first)
SHORT_ROW_KEYS = ("persistent/64x64x64/g8/w4/s12/k1", "persistent/64x64x128/g8/w4/s6/k1")
SPLIT_KEYS = ("splitk/16x64x128/g8/w4/s4/k4", "splitk/16x64x128/g8/w4/s4/k8", "splitk/16x64x128/g8/w4/s4/k16")


@dataclass(frozen=True)
class Probe:
    """One parameter's microbenchmark: shapes (M, N, K, layout) each timed with every config of ``keys``."""

    name: str
    parameter: str
    shapes: tuple[tuple[int, int, int, str], ...]
    keys: tuple[str, ...]
    mode: str  # "level", "slope" or "split" (calibration_fit.residuals), or "floor" (read off, not solved)
    why: str

    def pairs(self) -> list[tuple[int, int, int, str, str]]:
        """Every (M, N, K, layout, key) the probe times: each shape with each config, but a split deeper than the
        shape's K-steps (the kernels refuse it)."""

        def runs(key: str, k: int) -> bool:
            cfg = GemmConfig.from_key(key)
            return cfg.split_k * cfg.block_k <= k

        return [(m, n, k, layout, key) for m, n, k, layout in self.shapes for key in self.keys if runs(key, k)]


def _one_wave_side(profile: Profile) -> int:
    """Tiles along M and along N with at most one tile per SM (the K-step slope runs one wave)."""
    sms = int(profile.value("sm_count"))
    side = 1
    while (side + 1) ** 2 <= sms:
        side += 1
    return side


def probes(profile: Profile, quick: bool = False) -> list[Probe]:
    """The probes in solving order (each later one with the earlier results fixed); ``quick`` times fewer shapes."""
    side = _one_wave_side(profile)
    sms = int(profile.value("sm_count"))
    wave_m, wave_n = side * 128, side * 256
    sync_side = min(side, 8)  # at most 64 tiles: the L2 idle beside their steps
    long_k = (4096, 8192) if quick else (4096, 8192, 16384)
    tiny = ((64, 64, 64, "nn"), (128, 128, 64, "nn")) if quick else ((64, 64, 64, "nn"), (128, 128, 64, "nn"),
                                                                         (64, 128, 128, "nt"))  # fmt: skip
    return [
        Probe("launch", "model_launch_extra", tiny,
              ("persistent/64x64x64/g8/w4/s4/k1", "persistent/64x64x32/g8/w4/s2/k1"), "level",
              "one tile: the launch and one work item, nothing to overlap"),
        Probe("tma-launch", "model_tma_launch_extra", tiny,
              ("tma/64x128x64/g8/w4/s4/k1", "tma/128x128x64/g8/w8/s4/k1"), "level",
              "the same tiny GEMMs through TMA configs: their descriptors' extra launch cost"),
        Probe("iteration", "model_iteration_overhead",
              tuple((wave_m, wave_n, k, "nn") for k in long_k),
              ("persistent/128x256x64/g8/w8/s4/k1/f",), "slope",
              "one wave of one 128x256 tile per SM, K grown: the time per K-step beyond its matrix instructions"),
        Probe("l2-floor", "model_l2_bandwidth_scale",
              tuple((side * 128, side * 128, k, "nn") for k in long_k), L2_FLOOR_KEYS, "floor",
              "one wave of one TMA 128x128 tile per SM, K grown: the L2 rate tile loads reach where they bind"),
        Probe("short-rows", "model_short_row_read_share",
              tuple((8, rows * sms * 64, 16384, "nt") for rows in ((2,) if quick else (2, 4))), SHORT_ROW_KEYS,
              "floor", "a weight stream read along K in 128- and 256-byte rows, the same shared memory, HBM-bound: "
              "the short rows' read rate"),
        Probe("stages", "model_latency_hiding",
              tuple((128, n, k, "nn") for n in (256, 2048) for k in long_k), STAGE_KEYS, "slope",
              "8 and 64 tiles of 64x64 (the L2 idle) at 4 and 8 stages, K grown: how much of a copy's latency the "
              "prefetched stages hide"),
        Probe("tma-stages", "model_tma_latency_hiding",
              tuple((128, n, k, "nn") for n in (512, 4096) for k in long_k), TMA_STAGE_KEYS, "slope",
              "8 and 64 tiles of TMA 64x128 (the L2 idle) at 4 and 8 stages, K grown: how much of a TMA copy's latency "
              "the prefetched stages hide"),
        Probe("composite-step", "model_composite_iteration_overhead",
              tuple((side * 128, side * 192, k, "nn") for k in long_k), COMPOSITE_STEP_KEYS, "slope",
              "one wave of composite tiles (two dots on one A tile), K grown: their K-step beyond a TMA one's"),
        Probe("sync-rate", "model_mma_small_rate",
              tuple((sync_side * 32, sync_side * 128, k, "nn") for k in long_k), SYNC_RATE_KEYS, "slope",
              "one wave of 32x128 tiles (the synchronous matrix path), at most 64, K grown: the matrix rate of "
              "tiles narrower than the asynchronous instruction"),
        Probe("tile", "model_tile_overhead",
              ((4096, 4096, 32, "nn"),) if quick else ((4096, 4096, 32, "nn"), (2048, 8192, 32, "nn")),
              ("persistent/64x64x32/g8/w4/s2/k1", "persistent/16x64x32/g8/w4/s2/k1"), "level",
              "K of one step over many waves of tiles: each work item's fixed cost"),
        Probe("zero-fill", "model_zero_fill_cycles",
              ((2048, 2048, 64, "nn"),) if quick else ((2048, 2048, 64, "nn"), (4096, 1024, 64, "nn")),
              ("persistent/64x64x64/g8/w4/s12/k1", "persistent/64x64x64/g8/w4/s8/k1"), "level",
              "one K-step on deep pipelines: the prologue zero-fills the stages beyond it"),
        Probe("flatten", "model_flatten_hiding",
              ((4096, 4096, 128, "nn"),) if quick else ((4096, 4096, 128, "nn"), (2048, 8192, 128, "nn")),
              FLAT_KEYS, "flat",
              "one or two K-steps over many waves, a flattened tile loop beside its plain twin: the share of each work "
              "item's fixed cost the flat loop hides"),
        Probe("splitk-reduce", "model_splitk_reduce_cost", tuple((16, 256, k, "nn") for k in (512, 1024, 2048)),
              SPLIT_KEYS, "split",
              "four 16x64 tiles split 4, 8 and 16 ways, each slice one or two K-steps (one wave, the last slice "
              "reduces): what one more slice's partial costs"),
        Probe("narrow", "model_narrow_copy_cycles",
              tuple((64, 128, k, "nt") for k in ((4094, 8190) if quick else (4094, 8190, 12286))),
              NARROW_KEYS, "slope",
              "two 64x64 tiles whose rows are 4-byte aligned (K = 2 mod 4, too small to copy aligned), K grown: what "
              "a narrow copy costs beyond its issue"),
        Probe("scalar-chain", "model_scalar_round_trips",
              tuple((8, 16384, k, "nt") for k in ((4095, 8191) if quick else (4095, 8191, 12287))),
              SCALAR_CHAIN_KEYS, "slope",
              "a weight of odd K streamed element-wise at M = 8, 8 loads a thread, K grown: the latencies one "
              "synchronous K-step waits"),
        Probe("scalar", "model_scalar_load_cost",
              ((64, 4095, 1024, "nn"),) if quick else ((64, 4095, 1024, "nn"), (64, 2047, 2048, "nn")),
              ("persistent/64x64x64/g8/w4/s4/k1", "persistent/64x128x64/g8/w4/s4/k1"), "level",
              "B's rows misaligned (odd N), too small to copy: element-wise loads along N"),
        Probe("scalar-k", "model_scalar_k_load_share",
              ((4096, 64, 1023, "nn"),) if quick else ((4096, 64, 1023, "nn"), (2048, 64, 2047, "nn")),
              ("persistent/64x64x64/g8/w4/s4/k1", "persistent/128x64x64/g8/w4/s3/k1"), "level",
              "A's rows misaligned (odd K), too small to copy: element-wise loads along K"),
    ]  # fmt: skip


@dataclass(frozen=True)
class WaveStep:
    """One slope pair of a grid with at most one tile per SM: its config, tiles, one tile's K-panel bytes per
    K-step, and the seconds per K-step (the slope between two K)."""

    key: str
    tiles: int
    tile_bytes: float
    seconds: float


def one_wave_steps(profile: Profile, timings: Sequence[Timing]) -> list[WaveStep]:
    """The K-steps of every one-wave slope pair among ``timings`` (more tiles than SMs, or no K-steps between the
    two timings: the pair bounds nothing and is left out)."""
    from theodolite.model.calibration_fit import slope_pairs

    sms = int(profile.value("sm_count"))
    out = []
    for a, b in slope_pairs(timings):
        short, long_ = timings[a], timings[b]
        cfg = GemmConfig.from_key(short.key)
        tiles = -(-short.m // cfg.block_m) * -(-short.n // cfg.tile_n)
        steps = -(-long_.k // cfg.block_k) - -(-short.k // cfg.block_k)
        elapsed = long_.seconds - short.seconds
        if tiles <= sms and steps > 0 and elapsed > 0:
            tile_bytes = (cfg.block_m + cfg.tile_n) * cfg.block_k * DTYPE_BYTES[short.dtype]
            out.append(WaveStep(short.key, tiles, float(tile_bytes), elapsed / steps))
    return out


def _tightest(bounds: Sequence[tuple[str, float]]) -> float:
    """Each config's bound is the smallest over its pairs (the noise of one slope does not lift it); the floor is the
    largest over configs: every bound holds, the tightest wins."""
    by_key: dict[str, list[float]] = {}
    for key, rate in bounds:
        by_key.setdefault(key, []).append(rate)
    return max(min(rates) for rates in by_key.values())


def l2_scale_floor(profile: Profile, timings: Sequence[Timing]) -> dict[str, float]:
    """The least ``model_l2_bandwidth_scale`` one wave's K-steps allow: one tile per SM reads its A and B K-panels from
    L2 once per K-step (no multicast), so the wave's bytes per K-step over the time per K-step bound the L2 bandwidth
    those loads reach from below, over the profile's ``l2_bandwidth``; the tightest config's bound, the one whose
    K-steps ask the L2 for the most bytes per matrix instruction (the l2-floor probe's TMA 128x128 tiles).  A fit that
    goes below it makes the probes' own shapes L2-bound at up to twice their measured time (H100: a scale of 0.56
    against the 1.22 the iteration probe implies).  {} where no pair is timed."""
    bandwidth = float(profile.value("l2_bandwidth"))
    steps = one_wave_steps(profile, timings)
    if not steps or bandwidth <= 0:
        return {}
    return {"model_l2_bandwidth_scale": _tightest([(w.key, w.tiles * w.tile_bytes / w.seconds) for w in steps])
                                        / bandwidth}  # fmt: skip


def tma_stream_floor(profile: Profile, timings: Sequence[Timing]) -> dict[str, float]:
    """The least ``model_tma_stream_scale`` the TMA configs' one-wave K-steps allow: each tile's program alone on its
    SM moves its K-panels at its step rate, at most the SM's streaming ceiling for TMA copies; over the pointer-based
    ceiling (``hbm_read_bandwidth_one_sm``), and never below 1 (a TMA step slower than that bounds nothing: the scale's
    default).  H200: the tma-stages probe's 8-stage 64x128 tiles stream 150 GB/s per SM against the probe's 90.  {}
    where no TMA pair is timed or the profile lacks the per-SM probe."""
    one_sm = profile.metrics.get("hbm_read_bandwidth_one_sm")
    steps = [w for w in one_wave_steps(profile, timings) if GemmConfig.from_key(w.key).variant == "tma"]
    if not steps or one_sm is None or one_sm.value <= 0:
        return {}
    rate = _tightest([(w.key, w.tile_bytes / w.seconds) for w in steps])
    return {"model_tma_stream_scale": max(1.0, rate / one_sm.value)}


def short_row_share(timings: Sequence[Timing]) -> dict[str, float]:
    """``model_short_row_read_share``: on each weight stream the short-rows probe timed with both configs, the long
    rows' time over the short rows' (both HBM-bound, the same tiles and bytes in flight, so the ratio is the short
    rows' read rate as a share), the median over its shapes, within the parameter's bounds (a short-row stream that ran
    faster bounds nothing: 1).  {} where no shape has both timings."""
    from theodolite.model.calibration_fit import BOUNDS

    short, long_ = SHORT_ROW_KEYS
    by_shape: dict[tuple[int, int, int, str, str], dict[str, float]] = {}
    for t in timings:
        if t.key in SHORT_ROW_KEYS:
            by_shape.setdefault(t.shape, {})[t.key] = t.seconds
    ratios = [pair[long_] / pair[short] for pair in by_shape.values() if short in pair and long_ in pair]
    if not ratios:
        return {}
    low, high = BOUNDS["model_short_row_read_share"]
    return {"model_short_row_read_share": min(max(statistics.median(ratios), low), high)}


def floor_values(profile: Profile, timings: Sequence[Timing]) -> dict[str, float]:
    """Every ``FLOOR_PARAMETERS`` value the probes' timings give (a name absent: no timing bounds it): the one-wave
    probes' floors and the short rows' read share."""
    return {**l2_scale_floor(profile, timings), **tma_stream_floor(profile, timings), **short_row_share(timings)}


def probe_parameters() -> tuple[str, ...]:
    """The parameters the probes measure (any profile: the list does not depend on the GPU)."""
    return tuple(dict.fromkeys((*(p.parameter for p in probes(_any_profile())), *FLOOR_PARAMETERS)))


def floor_sources(profile: Profile) -> tuple[str, ...]:
    """The probes whose timings the floors read: every slope- or floor-mode probe (one wave over long K, or the short
    rows' weight streams) of asynchronous copies (the scalar chain's element-wise loads and the narrow probe's 4-byte
    copies bound neither the L2 rate nor TMA streaming; the sync-rate probe's steps are bound by their matrix
    instructions)."""
    skip = (SCALAR_CHAIN_KEYS, NARROW_KEYS, SYNC_RATE_KEYS)
    return tuple(p.name for p in probes(profile) if p.mode in ("floor", "slope") and p.keys not in skip)


def _any_profile() -> Profile:
    from theodolite.profile.datasheet import h100_sxm

    return h100_sxm()


def all_pairs(items: Sequence[Probe]) -> list[tuple[int, int, int, str, str]]:
    return [pair for probe in items for pair in probe.pairs()]
