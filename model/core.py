"""The cost formula, written once and evaluated two ways.

``cost(shape, cfg, hw, ops)`` works on numpy arrays (the whole config space at once, or a grid of
shapes x configs by broadcasting) and on Python scalars (one config, for the microsecond fast
path), through the ``ops`` namespace.  There are no Python branches on data in here.

Structure (every hardware number from the profile via ``Hardware``):

- tiles = ceil(M/BM) x ceil(N/BN) (x batch); iterations = ceil(K/BK) (split-K: per slice);
- work items (tiles, or tile slices) run in waves of the programs that fit at once; the last,
  partial wave is evaluated on its own (its SMs hold fewer programs, each runs faster);
- per SM, an iteration costs max(programs x max(matrix or shared memory plus load issue, the K-step's bytes at
  one SM's read ceiling), one program's chain: max(its instructions + loop overhead, the ceiling, a stage copy's
  wait (latency + those bytes) / (stages - 1) x latency_hiding)); a work item adds its pipeline fill, fixed cost and
  epilogue (its tile written at one SM's bandwidth, a wave's tiles no faster than the output write bandwidth),
  and a loop shorter than the pipeline the stages its prologue zero-fills (cp.async: the loop condition is a copy
  mask);
- the memory system is a shared fluid: all L2 requests over the L2 bandwidth, all HBM misses
  (distinct rows/columns of the tiles running at once under the grouped order, plus the reuse
  the effective L2 cannot hold) and stores over HBM bandwidth reachable from the active SMs;
- kernel = max(SM time, memory time) of the full waves + the same of the last wave (its reads at its own SMs'
  read share); total = launches + aligned copies + kernel + fix-up.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from theodolite.kernels.config import (
    ASYNC_COPY_MIN_BYTES,
    COOP_MIN_PARTIAL_BYTES,
    COOP_MIN_SPLIT,
    TAIL_CHUNKS,
    TAIL_MAX_SPLIT,
    TAIL_MIN_STEPS,
)
from theodolite.model.hardware import Hardware

PARTIAL_BYTES = 4  # fp32 partial tiles (the kernels' split-K / Stream-K workspace)
VECTOR_BYTES = 16  # a full-width copy: 16 bytes a thread (narrower ones are 4- or 8-byte rows' copies)
# L2 round trips every split-K program spends counting itself in after its K loop, holding its SM slot: the release
# of its partial's stores, then the acq_rel add on the tile's counter whose value it waits for (kernels'
# _reduce_slices).  Priced per round of programs (a work item's fixed cost), the last round's included, so the
# last slice's fix-up holds only its wait for the partials and their chain.  Before 2026-11-29 they were priced
# once, on the fix-up (2.0 chosen from 0/1/2/4/8 on both GPUs' suites), which a one-round split pays about alike;
# within a shape, doubling a split cost ~0.7 us more per added program per SM than that priced (H200 sweeps, 2,250
# pairs, median; L2 latency 0.23 us) and 8 x 16896 x 2048 nt at split 16 measured 48.2 us against 28.1 priced, 33.3
# with these (experiments/splitk_count_in.py)
SPLITK_COUNT_IN_TRIPS = 2.0


class NumpyOps:
    minimum = staticmethod(np.minimum)
    maximum = staticmethod(np.maximum)
    ceil = staticmethod(np.ceil)
    floor = staticmethod(np.floor)
    where = staticmethod(np.where)
    sqrt = staticmethod(np.sqrt)

    @staticmethod
    def clip01(x: Any) -> Any:
        return np.clip(x, 0.0, 1.0)

    @staticmethod
    def take(table: tuple[float, ...], index: Any) -> Any:
        return np.asarray(table)[np.asarray(index, dtype=np.intp)]


class ScalarOps:
    minimum = staticmethod(min)
    maximum = staticmethod(max)
    ceil = staticmethod(math.ceil)
    floor = staticmethod(math.floor)
    sqrt = staticmethod(math.sqrt)

    @staticmethod
    def where(condition: Any, a: Any, b: Any) -> Any:
        return a if condition else b

    @staticmethod
    def clip01(x: float) -> float:
        return 0.0 if x < 0.0 else (1.0 if x > 1.0 else x)

    @staticmethod
    def take(table: tuple[float, ...], index: Any) -> float:
        return table[int(index)]


def cost(
    m: Any,
    n: Any,
    k: Any,
    batch: int,
    a_vec: float,
    b_vec: float,
    out_bytes: int,
    c: Any,
    hw: Hardware,
    ops: Any,
    detail: bool = False,
) -> tuple[Any, dict[str, Any]]:
    """Seconds for configs ``c`` (attributes: arrays or scalars) on shape(s) m, n, k (launch, copy excluded).

    ``a_vec``/``b_vec``: bytes per load instruction of A/B (16 aligned, else the element size).
    """
    mn, mx, ceil = ops.minimum, ops.maximum, ops.ceil
    e = hw.element_bytes
    sm = c.sm
    scalar = synchronous(a_vec, b_vec)  # element-wise loads the pipeliner cannot make asynchronous
    tm = ceil(m / c.bm)
    tn = ceil(n / c.bn)
    kt = ceil(k / c.bk)
    plane = tm * tn
    tiles = batch * plane
    iters = ceil(kt / c.split)
    # split-K cuts K into slices of ceil(kt / split) steps (kernels' splitk_kernel), so only ceil(kt / iters) slices
    # of a tile hold K-steps; the empty ones (the last slice indices, launched last) only store a zero partial (and
    # reduce their row chunks where the reduction is cooperative)
    live = ceil(kt / iters)
    # Stream-K (kernels' streamk_partition): whole waves data-parallel, then the last partial wave's tiles cut
    # into ``sk_split`` aligned K-slices, one program each; a split tail reduces its fp32 partials in the kernel
    remainder = c.is_sk * (tiles % c.pprog)
    sk_split = mx(mn(mn(ops.floor(c.pprog / mx(remainder, 1.0)), ops.floor(kt / TAIL_MIN_STEPS)), TAIL_MAX_SPLIT), 1.0)
    units = remainder * sk_split
    items = ops.where(c.is_sk, tiles - remainder + units, tiles * live)
    grid = ops.where(c.is_split, items, ops.where(c.is_sk, mx(mn(c.pprog, mx(tiles - remainder, units)), 1.0),
                                                  mn(tiles, c.pprog)))  # fmt: skip
    conc = mx(mn(grid, c.slots), 1.0)
    full = ops.floor((items - units) / conc)
    rest = items - full * conc
    has_rest = rest > 0
    # the last items run in rounds of at most ``conc``: a Stream-K grid (launched_per_sm programs per SM) can be wider
    # than its build lets reside, and its programs beyond the slots start as the first ones end (persistent and
    # split-K grids leave rest < conc: one round); every round but the last is full
    rounds = mx(ceil(rest / conc), 1.0)
    waves = full + has_rest * rounds
    last = rest - (rounds - 1.0) * conc
    iters_l = ops.where(units > 0, ceil(kt / sk_split), iters)  # the last wave's K-steps (a Stream-K slice's)
    reduces = units > remainder  # a split tail: each slice stores a partial, waits, reduces its row chunks

    # ---- the window of items running at once: distinct rows/columns under the grouped order ----
    planes = mx(conc / plane, 1.0)  # planes in flight at once: a partial one adds its share, not a whole
    w = mn(conc, plane)
    gmm = mn(c.gm, tm)
    per_group = gmm * tn
    within = w <= per_group
    rows = ops.where(within, mn(gmm, w), mn(tm, gmm * ceil(w / per_group)))
    cols = ops.where(within, ceil(w / gmm), tn)
    a_rows = planes * mn(rows * c.bm, m)
    b_cols = planes * mn(cols * c.bn, n)
    step_bytes = c.bk * e
    requested = conc * c.panel * step_bytes  # L2 requests per iteration of the whole wave
    unique = (a_rows + b_cols) * step_bytes
    # the tiles of a wave walk K in near lockstep, so a row/column panel is reused within a few K-steps:
    # that working set (distinct panels x a few steps) is far below the effective L2, every reuse hits
    hbm_step = unique
    # what those bytes cost at the HBM's rate: an operand read along K in short rows (BLOCK_K x element size up to
    # predict.SHORT_ROW_BYTES) reads slower, each K-step opening every row's DRAM page again (a_read, b_read: 1 / the
    # probed share, 1 otherwise)
    hbm_cost_step = (a_rows * c.a_read + b_cols * c.b_read) * step_bytes
    # a K-step waits for its slowest copy: the rows/columns a tile wraps past the matrix's edge (a tile wider than
    # the matrix) are L2 hits that arrive with the originals, so they do not dilute the step's miss share
    inside = conc * (mn(c.bm, m) + mn(c.bn, n)) * step_bytes
    miss = mn(hbm_step / inside, 1.0)
    latency = hw.l2_latency_s + miss * (hw.hbm_latency_s - hw.l2_latency_s)

    # ---- per-SM time ----
    active_f = mn(conc, sm)
    occ_f = ceil(conc / active_f)
    active_l = mx(mn(last, sm), 1.0)
    occ_l = ceil(last / active_l)
    # an asynchronous copy moves a K-step's panels through its SM at most at one SM's read ceiling (measured: a
    # K-step is never faster, experiments/step_vs_programs.py), and each stage's copy waits its
    # latency plus that streaming time, overlapped by the (stages - 1) copies prefetched before it
    stream = 0.0 if scalar else c.stream
    per_prog = per_program(c, a_vec, b_vec, ops)
    # a misaligned operand is loaded synchronously (no async copy): nothing prefetches its latency
    # an asynchronous K-step's wait (stage_wait): its (stages - 1) prefetched copies overlap a latency loaded in
    # proportion to the L2's utilisation: the stage bytes of the programs in flight, averaged over the kernel's
    # waves (items / waves), at the L2 bandwidth.  The average, not each wave's own count: a persistent grid's next
    # items start as its first ones finish, and per wave a wider first wave over the same number of waves would cost
    # more SMs time (a loaded latency concave in the load), against the monotone sanity the model keeps
    l2_step = mx(items / mx(waves, 1.0), 1.0) * c.panel * step_bytes / hw.l2_bandwidth
    if scalar:
        hide = latency * scalar_batches(c, a_vec, b_vec, hw, ops)
    else:
        hide = mx(stage_wait(latency, stream, l2_step, c.lat_div, ops), l2_step)
    # one program's K-step: its instructions and loop bookkeeping, or the copies it waits for, which run under
    # that bookkeeping.  Synchronous (element-wise) loads do not overlap anything of their own step: the program
    # issues them, waits for the last, stores them to shared memory and runs its matrix instructions, so that
    # chain is the sum (measured: one-wave split-K steps of the element-wise builds ran 1.7-3.0x the old max of
    # the two, ~1.0x the sum; experiments/model_checks.py scalar-steps).  The programs resident on an
    # SM share its matrix units and its read ceiling
    overhead = hw.iteration_overhead_s + c.it_extra
    chain = per_prog + hide + overhead if scalar else mx(per_prog + overhead, mx(stream, hide))
    per_sm = mx(per_prog, stream)  # each resident program's share of the SM's matrix units and read ceiling
    it_f = mx(occ_f * per_sm, chain)
    it_l = mx(occ_l * per_sm, chain)

    # the epilogue: after its K loop a program writes its tile (accumulator -> registers -> global) through its
    # SM at one SM's bandwidth; its own loop has nothing left to overlap it with (short K loops: comparable to
    # the whole loop, so larger tiles pay it per more work).  The items of a wave end their loops together, so they
    # write their output tiles at once: an SM's writes end no sooner than the wave's at the output write bandwidth
    # (the tile-write probe's).  Measured, one K-step over 8192x8192 outputs ran 1.3-1.5x the model's time without
    # that bound, ~0.9x with it (experiments/epilogue_tiles.py, H200).  Split-K partials go to a workspace in L2
    def writes(writers: Any) -> Any:  # seconds an SM's occ_f epilogues write, with ``writers`` items writing at once
        tile = c.elems * ops.where(c.is_split, PARTIAL_BYTES, out_bytes)
        wave = ops.where(c.is_split, 0.0, writers * c.elems * out_bytes / hw.output_write_bandwidth)
        return mx(occ_f * tile / hw.sm_bandwidth, wave)

    # a flattened loop (one loop over tiles and K steps) issues the next item's first loads before this
    # item's epilogue: that share of the fill latency and tile overhead is hidden, except for a program's first
    before = latency + hw.tile_overhead_s
    # a loop shorter than the pipeline: its prologue zero-fills the stages beyond its last K-step, with nothing
    # to overlap them (per work item, once per program when flattened); only the asynchronous operand(s) prefetch
    fill_row = zero_fill(c, a_vec, b_vec)
    exposed = mx(c.prefetch - iters, 0.0) * fill_row
    # the pipeline fill: an item's prologue requests its prefetched K-steps at once (those the loop has: the others
    # are zero-filled, above), and they share the SM's copy path, so its first step's operands arrive only after
    # all of them, each at one SM's streaming ceiling (measured: one tile over 1-41 K-steps takes 0.10-0.16 us more
    # per stage, TMA and cp.async alike; experiments/pipeline_fill.py).  A loop bound by that streaming absorbs it:
    # its steps' time beyond their other bounds.  Per work item, or once per program for a flattened loop, as the
    # zero fill
    other = mx(occ_f * per_prog, mx(per_prog + overhead, hide))
    fill = mx(mn(c.prefetch, iters) * stream - iters * (it_f - other), 0.0)
    # the K-steps the prologue prefetched were requested with the item's first: their operands arrive after the
    # latency its fixed cost holds (``latency`` below) and the fill, so they do not wait their share of it again, as
    # a steady-state K-step does (``hide``); they cost the larger of their SM's matrix share, their instructions,
    # their streaming and their L2 requests.  Per work item, or once per program for a flattened loop, as the fill.
    # Before 2026-11-29 that wait was counted twice: a latency-bound item paid about one latency over the hiding more
    asynchronous = 0.0 if scalar else 1.0
    prefetched = asynchronous * mn(c.prefetch, iters) * (it_f - mx(mx(occ_f * per_sm, per_prog + overhead),
                                                                  mx(stream, l2_step)))  # fmt: skip
    # the last wave's items run their own K-steps (a Stream-K tail's slices: iters_l) at their own resident count:
    # their prologue with those (what their loop absorbs at it_l, or a faster read ceiling could cost time)
    exposed_l = mx(c.prefetch - iters_l, 0.0) * fill_row
    other_l = mx(occ_l * per_prog, mx(per_prog + overhead, hide))
    fill_l = mx(mn(c.prefetch, iters_l) * stream - iters_l * (it_l - other_l), 0.0)
    prefetched_l = asynchronous * mn(c.prefetch, iters_l) * (it_l - mx(mx(occ_l * per_sm, per_prog + overhead),
                                                                      mx(stream, l2_step)))  # fmt: skip
    # what an item runs outside its K loop (index math, accumulator set-up, the epilogue's conversion and stores)
    # issues from its SM's schedulers and store path, which the SM's resident programs take in turn, as they share
    # its matrix units in the K-steps (occ_f x per_sm): per wave of items, occ_f of those; their first loads' latency
    # overlaps.  Taken as overlapping (the fit before), the tile probe's four 64x64x32 programs per SM left
    # log-RMS 0.188 and the launch probe's extra solved at its bound (1e-9 s); shared, 0.092 and 0.20 us, and two
    # plain 128x128x64 programs per SM no longer price below one flattened one (flatten probe: 26.2 us measured)
    serial = occ_f * hw.tile_overhead_s * (1.0 - c.flat_hide) + writes(conc)
    serial_l = occ_f * hw.tile_overhead_s * (1.0 - c.flat_hide) + writes(last)  # the last round's writers
    count_in = c.is_split * SPLITK_COUNT_IN_TRIPS * hw.l2_latency_s  # a split-K program's arrival (above)
    prologue = exposed + fill - prefetched
    prologue_l = exposed_l + fill_l - prefetched_l
    fixed = latency * (1.0 - c.flat_hide) + serial + prologue * (1.0 - c.is_flat) + count_in
    # the last wave's rounds: all but the last full (occ_f programs per SM writing), the last with its own writers
    fixed_l = latency * (1.0 - c.flat_hide) + prologue_l * (1.0 - c.is_flat) + count_in
    fixed_l = fixed_l + ((rounds - 1.0) * serial + serial_l) / rounds
    # a Stream-K slice: its partial stored, then its share (ceil(chunks / split) of TAIL_CHUNKS row chunks) of all
    # slices' partials read and written out through its SM, the fp32 partial traffic at 1/streamk_reduce_cost of
    # one SM's bandwidth; two L2 round trips (count in, wait), and one per chunk load: the reduction's loop over
    # slices is not pipelined, so its ceil(chunks / split) x split loads are a chain (kernels' _reduce_slices)
    chunk_loads = ceil(TAIL_CHUNKS / sk_split)
    share = chunk_loads / TAIL_CHUNKS
    tail = ops.where(reduces, c.elems * (hw.streamk_reduce_cost * PARTIAL_BYTES * (1.0 + share * sk_split)
                     + out_bytes * (share - 1.0)) / hw.sm_bandwidth
                     + (2.0 + chunk_loads * sk_split) * hw.l2_latency_s, 0.0)  # fmt: skip
    sk_slow = 1.0 + c.is_sk * (hw.streamk_slowdown - 1.0) * reduces
    # the full waves' SM time (a flattened loop's one prologue with them when they exist), then the last wave's
    flat_fill = ops.where(full > 0, prologue, 0.0) * c.is_flat
    sm_full = full * (fixed + iters * it_f) + c.flat_hide * before + flat_fill
    sm_last = has_rest * (rounds * (fixed_l + tail) + iters_l * sk_slow * ((rounds - 1.0) * it_f + it_l))
    sm_last = sm_last + ops.where(full > 0, 0.0, prologue_l) * c.is_flat
    sm_time = sm_full + sm_last

    # ---- memory system: a shared fluid within each phase of the kernel ----
    # The full waves and the last wave are two phases, each as slow as its slowest resource: a last wave of a few
    # programs streams at what those SMs reach (read_share of its active SMs), not at the whole GPU's bandwidth, and
    # the full waves' HBM time does not hide it.  One max over the whole kernel let a memory-bound kernel's partial
    # last wave cost nothing beyond its bytes (H200 decode weight streams, 16x256 tiles over 1.3-3.4 waves: measured
    # 1.13-1.29x the even configs that the model tied with them; experiments/phase_roofline.py)
    steps_full = full * conc * iters
    # a split Stream-K tail writes each output tile once; its slices' fp32 partials cross L2 twice (stored,
    # read back by the reducing slices) and go to HBM and back: measured, 128x256 tiles gain nothing past 4-5
    # slices, as this traffic says (experiments, Stream-K "how many K-slices")
    workspace = ops.where(reduces, units, 0.0) * c.elems * PARTIAL_BYTES
    l2_full = steps_full * c.panel * step_bytes / hw.l2_bandwidth
    l2_last = (rest * iters_l * c.panel * step_bytes + 2.0 * workspace) / hw.l2_bandwidth
    l2_time = l2_full + l2_last
    hbm_bw = hw.hbm_tile_bandwidth * read_share(active_f, hw, ops)
    hbm_bw_l = hw.hbm_tile_bandwidth * read_share(active_l, hw, ops)
    store = ops.where(c.is_sk, tiles * out_bytes, ops.where(c.is_split, tiles * c.split * PARTIAL_BYTES,
                                                            items * out_bytes)) * c.elems  # fmt: skip
    store_full = store * (full * conc) / items
    write_bw = hw.hbm_write_bandwidth
    hbm_full = full * iters * hbm_cost_step / hbm_bw + store_full / write_bw
    # the last wave's rounds: all but the last at the first wave's width, the last at its own
    hbm_last = has_rest * (iters_l * hbm_cost_step * ((rounds - 1.0) / hbm_bw + last / conc / hbm_bw_l)
                           + workspace / hbm_bw + (store - store_full + workspace) / write_bw)  # fmt: skip
    hbm_time = hbm_full + hbm_last
    mem_time = mx(l2_time, hbm_time)
    kernel = mx(sm_full, mx(l2_full, hbm_full)) + mx(sm_last, mx(l2_last, hbm_last))

    # ---- split-K's reduction (inside its one launch: by the last slice of each tile to arrive, or shared) ----
    # its chain of partial tiles moves at one SM's bandwidth (tiles beyond one per SM queue), unless the
    # aggregate workspace traffic is slower
    partials = tiles * c.split * c.elems * PARTIAL_BYTES
    ws_bw = ops.where(partials <= hw.l2_effective_bytes, hw.l2_bandwidth, hw.hbm_tile_bandwidth)
    chain = ceil(tiles / sm) * c.split * c.elems * PARTIAL_BYTES * hw.splitk_reduce_cost / hw.sm_bandwidth
    # a cooperative reduction (kernels' config.cooperative_reduction, vectorised here: a deep split whose grid is one
    # program per SM or fewer) puts that chain on every slice, each reading ceil(TAIL_CHUNKS / split) row chunks of
    # every partial
    coop = ((c.is_split > 0) & (c.split >= COOP_MIN_SPLIT)
            & (c.split * c.elems * PARTIAL_BYTES >= COOP_MIN_PARTIAL_BYTES) & (tiles * c.split <= sm))  # fmt: skip
    chain = chain * ops.where(coop, ceil(TAIL_CHUNKS / c.split) / TAIL_CHUNKS, 1.0)
    # plus the last slice's wait for the first partial it sums (its count-in is in its round's fixed cost)
    second = (latency + mx(partials / ws_bw, chain)
              + tiles * c.elems * out_bytes / hw.hbm_write_bandwidth)  # fmt: skip
    fixup = ops.where(c.is_split > 0, second, 0.0)
    launch = c.launch_fixed + ops.where(c.is_split, tiles * c.split, grid) * hw.program_start_s / sm
    total = launch + kernel + fixup
    if not detail:
        return total, {}
    return total, {
        "launch": launch,
        "sm_time": sm_time,
        "mem_time": mem_time,
        "l2_time": l2_time,
        "hbm_time": hbm_time,
        "fixup": fixup,
        "iter_compute": occ_f * c.compute_it,
        "iter_smem": occ_f * c.smem_it,
        "iter_issue": occ_f * (c.issue_a / a_vec + c.issue_b / b_vec),
        "iter_latency": hide,
        "iter_l2": requested / hw.l2_bandwidth,
        "iter_hbm": hbm_cost_step / hbm_bw,
        "iter_total": it_f,
        "fixed_per_item": fixed,
        "zero_fill": exposed,  # a short loop's zero-filled prologue stages (per item; once per program if flat)
        "pipeline_fill": fill,  # the prologue's prefetched steps at one SM's streaming ceiling (as zero_fill)
        "prefetched": prefetched,  # what those steps do not wait, of the K-steps' time (as zero_fill)
        "#tiles": tiles,
        "#items": items,
        "#concurrent": conc,
        "#waves": waves,
        "#last_wave_busy": ops.where(has_rest, last / conc, 1.0),
        "#sm_busy": (full * active_f + has_rest * ((rounds - 1.0) * active_f + mn(last, sm))) / mx(waves * sm, 1.0),
        "#l2_hit": 1.0 - miss,
        "#resident_per_sm": occ_f,
        "#iterations": iters,
        "#tail_split": ops.where(reduces, sk_split, 1.0),  # K-slices per tile of a Stream-K last wave
    }


def read_share(active: Any, hw: Hardware, ops: Any = NumpyOps) -> Any:
    """Share of the HBM read bandwidth ``active`` SMs reach (whole SM counts, at most the GPU's): the profile's measured
    curve (``hardware.read_shares``), else a linear ramp to 90% at the saturation count, else all of it."""
    if hw.hbm_read_share:
        return ops.take(hw.hbm_read_share, active)
    if hw.hbm_saturation_sms:
        return ops.minimum(1.0, 0.9 * active / hw.hbm_saturation_sms)
    return 1.0


def stage_wait(latency: Any, stream: Any, l2_step: Any, lat_div: Any, ops: Any = NumpyOps) -> Any:
    """Seconds an asynchronous K-step waits for its copies: T with lat_div x T = latency x (1 + l2_step / T) + stream,
    the (stages - 1) prefetched copies (times model_latency_hiding, ``lat_div``) overlapping a latency that queueing
    at the L2 stretches by its utilisation (``l2_step``: the stage bytes in flight, averaged over the waves, at the L2
    bandwidth).  Measured, the stage series of 64x64x64 at 2-12 stages (experiments/
    stage_series.py): with 8 tiles the wait falls as latency / (stages - 1), with 128 tiles (L2 near its bandwidth) more
    slowly."""
    a = latency + stream
    return (a + ops.sqrt(a * a + 4.0 * lat_div * latency * l2_step)) / (2.0 * lat_div)


SCALAR_FIELDS = (
    "bm", "bn", "bk", "gm", "split", "is_sk", "is_split", "pprog", "slots", "panel", "elems", "per_program",
    "lat_div", "launch_fixed", "sm", "flat_hide", "it_extra", "stage_fill", "prefetch",
    "is_flat", "stream", "synchronous", "a_read", "b_read",
)  # fmt: skip


def per_program(c: Any, a_vec: float, b_vec: float, ops: Any = NumpyOps) -> Any:
    """Seconds one program needs per K-iteration on its SM: the slower of matrix and shared memory, plus the
    load issue of pointer-based loads (the same warps issue loads and matrix instructions)."""
    narrow = (c.narrow_a / a_vec if ASYNC_COPY_MIN_BYTES <= a_vec < VECTOR_BYTES else 0.0) + (
        c.narrow_b / b_vec if ASYNC_COPY_MIN_BYTES <= b_vec < VECTOR_BYTES else 0.0
    )  # narrow (4- or 8-byte) asynchronous copies: each warp-wide copy's own cost (model_narrow_copy_cycles)
    return ops.maximum(c.compute_it, c.smem_it) + c.issue_a / a_vec + c.issue_b / b_vec + narrow


def zero_fill(c: Any, a_vec: float, b_vec: float) -> Any:
    """Seconds one zero-filled prologue stage costs (a loop shorter than its pipeline): its warp-wide masked copies,
    each operand's rows x BLOCK_K bytes over that operand's copy width (``a_vec``/``b_vec`` bytes), at
    ``model_zero_fill_cycles`` each (``fill_per_row``: that price per row and byte of width).  Measured with one K-step
    at 2-4 stages (experiments/zero_fill.py): a stage of 4-byte copies costs ~4x one of
    16-byte copies (H100 128x128x64: 0.67 us against 0.02-0.19)."""
    # only asynchronous copies are pipelined: an element-wise operand is loaded synchronously, once per K-step, while
    # the vector operand beside it (a mixed build) keeps its stages and zero-fills them as an all-vector build does
    a_rows = c.bm / a_vec if a_vec >= ASYNC_COPY_MIN_BYTES else 0.0
    b_rows = c.bn / b_vec if b_vec >= ASYNC_COPY_MIN_BYTES else 0.0
    return c.fill_per_row * (a_rows + b_rows)


def synchronous(a_vec: float, b_vec: float) -> bool:
    """Whether an operand's loads stay synchronous (the scalar binary): narrower than an asynchronous copy."""
    return min(a_vec, b_vec) < ASYNC_COPY_MIN_BYTES


def scalar_batches(c: Any, a_vec: float, b_vec: float, hw: Hardware, ops: Any = NumpyOps) -> Any:
    """Round trips per K-iteration of a kernel with a misaligned operand (call it only for those): its scalar
    loads are synchronous and held in registers until stored to its one shared-memory buffer (the scalar builds
    keep a single stage there), so an iteration waits for at least ``scalar_round_trips`` of them in a chain
    (load, store, barrier before the matrix instructions), and more when a thread has more than
    ``scalar_in_flight`` loads to keep outstanding.  The chain's count is the scalar-chain probe's (a weight of odd
    K streamed at M = 8 with 8 loads a thread: the H200 waits ~2 latencies a step, ~0.8 us)."""
    rows = (c.bm if a_vec < ASYNC_COPY_MIN_BYTES else 0.0) + (c.bn if b_vec < ASYNC_COPY_MIN_BYTES else 0.0)
    per_thread = rows * c.bk / (c.warps * hw.warp_size)
    return ops.maximum(ops.ceil(per_thread / hw.scalar_in_flight), hw.scalar_round_trips)


def hardware_tuple(hw: Hardware) -> tuple[Any, ...]:
    """The Hardware fields scalar_cost reads, in its unpacking order."""
    return (
        float(hw.element_bytes), hw.l2_effective_bytes, hw.l2_latency_s, hw.hbm_latency_s, hw.iteration_overhead_s,
        hw.tile_overhead_s, hw.l2_bandwidth, hw.hbm_tile_bandwidth, hbm_ramp(hw), hw.hbm_write_bandwidth,
        hw.launch_kernel_s, hw.program_start_s, hw.streamk_slowdown, hw.sm_bandwidth, hw.streamk_reduce_cost,
        hw.splitk_reduce_cost, hw.output_write_bandwidth,
    )  # fmt: skip


def hbm_ramp(hw: Hardware) -> tuple[float, ...]:
    """read_share at every whole SM count 0..sm_count (the scalar path indexes it)."""
    return tuple(float(read_share(a, hw, ScalarOps)) for a in range(hw.sm_count + 1))


def scalar_params(c: tuple[float, ...], h: tuple[Any, ...], out_bytes: int) -> tuple[Any, ...]:
    """One config's numbers for ``scalar_time``, with everything that does not depend on the shape computed once:
    the config's fields (``SCALAR_FIELDS`` order) and the hardware's (``hardware_tuple`` order)."""
    (bm, bn, bk, gm, split, is_sk, is_split, pprog, slots, panel, elems, per_program, lat_div, launch_fixed, sm, fh,
     it_extra, stage_fill, prefetch, is_flat, stream, sync, a_read, b_read) = c  # fmt: skip
    (e, l2_eff, l2_lat, hbm_lat, it_over, tile_over, l2_bw, hbm_read, hbm_share, hbm_write, _launch, prog_start,
     sk_slow, sm_bw, sk_reduce, split_reduce, out_write) = h  # fmt: skip
    it_over = it_over + it_extra  # this config's loop bookkeeping per K-iteration
    step_bytes = bk * e
    item_bytes = (PARTIAL_BYTES if is_split else out_bytes) * elems
    partial_tile = elems * PARTIAL_BYTES
    coop = bool(is_split) and split >= COOP_MIN_SPLIT and split * partial_tile >= COOP_MIN_PARTIAL_BYTES
    return (
        bm, bn, bk, gm, split, bool(is_sk), bool(is_split), pprog, slots, sm, per_program, lat_div,
        per_program if per_program > stream else stream,  # per_sm: an SM's programs share its streaming ceiling
        per_program + it_over,  # busy: one program's own instructions per K-step
        it_over, step_bytes, panel * step_bytes, l2_lat, hbm_lat - l2_lat, prog_start / sm, item_bytes, partial_tile,
        tile_over * (1.0 - fh),  # item_over: per work item, its overhead (the epilogue's writes in scalar_time)
        0.0 if is_split else 1.0 / out_write,  # write_share: seconds per byte of a wave's output writes
        1.0 - fh,  # kept: the share of the fixed cost a flattened loop does not hide
        fh, tile_over, stage_fill, prefetch, is_flat, stream, bool(sync), launch_fixed, out_bytes, elems, sm_bw,
        sk_reduce, sk_slow, l2_bw, l2_eff, hbm_read, hbm_share, hbm_write,
        split * partial_tile * split_reduce / sm_bw,  # reduce_chain: one tile's reduction chain per wave of tiles
        coop, -(-TAIL_CHUNKS // split) / TAIL_CHUNKS if split >= 1 else 1.0, a_read, b_read,
    )  # fmt: skip


def _prologue(iters: float, prefetch: float, stage_fill: float, stream: float, it_f: float, other: float) -> float:
    """A work item's prologue on Python numbers (core.cost's exposed + fill): its zero-filled stages beyond a loop of
    ``iters`` K-steps, and its pipeline fill less what a loop bound by its streaming absorbs."""
    exposed = (prefetch - iters) * stage_fill if iters < prefetch else 0.0
    if stream:
        absorbed = (prefetch if prefetch < iters else iters) * stream - iters * (it_f - other)
        if absorbed > 0:
            exposed += absorbed
    return exposed


def scalar_time(p: tuple[Any, ...], m: int, n: int, k: int, batch: int = 1) -> float:
    """``cost`` of one config (``scalar_params``) on Python numbers, hand-inlined for speed (~2 us).  Tests hold it
    equal to ``cost``; change both together."""
    (bm, bn, bk, gm, split, is_sk, is_split, pprog, slots, sm, per_program, lat_div, per_sm, busy,
     it_over, step_bytes, request_step, l2_lat, lat_span, start_per_sm, item_bytes, partial_tile, item_over,
     write_share, kept,
     fh, tile_over, stage_fill, prefetch, is_flat, stream, sync, launch_fixed, out_bytes, elems, sm_bw, sk_reduce,
     sk_slow, l2_bw, l2_eff, hbm_read, hbm_share, hbm_write, reduce_chain, coop, coop_share,
     a_read, b_read) = p  # fmt: skip
    tm = -(-m // bm)
    tn = -(-n // bn)
    kt = -(-k // bk)
    plane = tm * tn
    tiles = batch * plane
    iters = -(-kt // split)
    units = remainder = 0.0
    sk_split = 1.0
    if is_sk:  # whole waves data-parallel, the rest in aligned K-slices (core.cost, kernels' streamk_partition)
        remainder = tiles % pprog
        if remainder:
            sk_split = min(pprog // remainder, kt // TAIL_MIN_STEPS, TAIL_MAX_SPLIT)
            if sk_split < 1:
                sk_split = 1.0
        units = remainder * sk_split
        items = tiles - remainder + units
        grid = tiles - remainder if tiles - remainder > units else units
        if pprog < grid:
            grid = pprog
        if grid < 1:
            grid = 1
    elif is_split:
        items = tiles * -(-kt // iters)  # the slices holding K-steps (core.cost)
        grid = items
    else:
        items = tiles
        grid = tiles if tiles < pprog else pprog
    conc = grid if grid < slots else slots
    if conc < 1.0:
        conc = 1.0
    full = ((items - units) / conc).__floor__()
    rest = items - full * conc
    rounds = -(-rest // conc) if rest > 0 else 1.0  # the last items' rounds of at most conc (core.cost)
    w = conc if conc < plane else plane
    gmm = gm if gm < tm else tm
    per_group = gmm * tn
    if w <= per_group:
        rows = gmm if gmm < w else w
        cols = -(-w // gmm)
    else:
        rows = gmm * -(-w // per_group)
        if tm < rows:
            rows = tm
        cols = tn
    a_rows = rows * bm
    b_cols = cols * bn
    a_rows = a_rows if a_rows < m else m
    b_cols = b_cols if b_cols < n else n
    hbm_step = (a_rows + b_cols) * step_bytes
    hbm_cost_step = (a_rows * a_read + b_cols * b_read) * step_bytes  # at the HBM's rate (core.cost)
    if conc > plane:
        hbm_step *= conc / plane
        hbm_cost_step *= conc / plane
    inside = conc * ((bm if bm < m else m) + (bn if bn < n else n)) * step_bytes  # (core.cost)
    miss = hbm_step / inside
    latency = l2_lat + (miss if miss < 1.0 else 1.0) * lat_span
    active_f = conc if conc < sm else sm
    if sync:  # issue, the wait, then the bookkeeping: one chain (core.cost)
        hide = latency / lat_div
        chain = per_program + hide + it_over
    else:  # core.stage_wait at the load averaged over the waves, at least that L2 step, the read ceiling, the busy time
        waves = full + rounds if rest > 0 else full
        load = items / waves if waves > 1.0 else items
        l2_step = (load if load > 1.0 else 1.0) * request_step / l2_bw
        a = latency + stream
        hide = (a + math.sqrt(a * a + 4.0 * lat_div * latency * l2_step)) / (2.0 * lat_div)
        chain = hide if hide > l2_step else l2_step
        if stream > chain:
            chain = stream
        if busy > chain:
            chain = busy
    resident = -(-conc // active_f)  # programs per SM in the first wave (core.cost's occ_f)
    it_f = resident * per_sm
    if chain > it_f:
        it_f = chain
    write = resident * item_bytes / sm_bw  # the SM's epilogues, ending no sooner than the wave's writes (core.cost)
    if conc * item_bytes * write_share > write:
        write = conc * item_bytes * write_share
    fixed = latency * kept + resident * item_over + write  # the SM's resident programs in turn (core.cost)
    if is_split:
        fixed += SPLITK_COUNT_IN_TRIPS * l2_lat  # each program's count-in (core.cost)
    other = 0.0
    if stream:  # what a K-step costs beside its streaming (core.cost's ``other``)
        other = resident * per_program
        if busy > other:
            other = busy
        if hide > other:  # stream is 0 for synchronous loads: this is the asynchronous branch's wait
            other = hide
        if l2_step > other:
            other = l2_step
    exposed = _prologue(iters, prefetch, stage_fill, stream, it_f, other)
    if not sync:  # the prefetched K-steps wait no share of the latency again: their floor beside the SM's share
        unshared = busy if busy > stream else stream
        if l2_step > unshared:
            unshared = l2_step
        bare = resident * per_sm
        exposed -= (prefetch if prefetch < iters else iters) * (it_f - (bare if bare > unshared else unshared))
    sm_time = full * (fixed + exposed * (1.0 - is_flat) + iters * it_f) + fh * (latency + tile_over)
    if full:
        sm_time += exposed * is_flat  # per work item, or once per program for a flattened loop
    store = (tiles * out_bytes * elems) if is_sk else (tiles * split if is_split else items) * item_bytes
    store_full = store * (full * conc) / items
    hbm_bw = hbm_read * hbm_share[int(active_f)]  # read_share
    # the full waves, then the last wave: each phase as slow as its slowest resource (core.cost)
    steps_full = full * conc * iters
    kernel = steps_full * request_step / l2_bw
    hbm_full = full * iters * hbm_cost_step / hbm_bw + store_full / hbm_write
    if hbm_full > kernel:
        kernel = hbm_full
    if sm_time > kernel:
        kernel = sm_time
    if rest > 0:
        sm_full = sm_time
        workspace = 0.0
        last = rest - (rounds - 1.0) * conc  # every round but the last is full (core.cost)
        it_l = -(-last // (last if last < sm else sm)) * per_sm
        write_l = resident * item_bytes / sm_bw  # its last round's writes (core.cost's serial_l)
        if last * item_bytes * write_share > write_l:
            write_l = last * item_bytes * write_share
        fixed += (write_l - write) / rounds
        if chain > it_l:
            it_l = chain
        iters_l = -(-kt // sk_split) if units else iters
        resident_l = -(-last // (last if last < sm else sm))
        if stream:  # the last wave's prologue with its own K-steps and resident count (core.cost)
            other_l = resident_l * per_program
            if busy > other_l:
                other_l = busy
            if hide > other_l:
                other_l = hide
            if l2_step > other_l:
                other_l = l2_step
            exposed = _prologue(iters_l, prefetch, stage_fill, stream, it_l, other_l)
        else:
            exposed = _prologue(iters_l, prefetch, stage_fill, stream, it_l, other)
        if not sync:
            bare = resident_l * per_sm
            exposed -= (prefetch if prefetch < iters_l else iters_l) * (it_l - (bare if bare > unshared else unshared))
        if not full:
            sm_time += exposed * is_flat
        if units > remainder:  # a split Stream-K tail (core.cost)
            chunk_loads = -(-TAIL_CHUNKS // sk_split)
            share = chunk_loads / TAIL_CHUNKS
            traffic = elems * (sk_reduce * PARTIAL_BYTES * (1.0 + share * sk_split) + out_bytes * (share - 1.0))
            round_trips = 2.0 + chunk_loads * sk_split
            sm_time += rounds * (traffic / sm_bw + round_trips * l2_lat)
            sm_time += iters_l * ((rounds - 1.0) * it_f + it_l) * (sk_slow - 1.0)
            workspace = units * partial_tile  # through L2 twice, to HBM and back (core.cost)
        sm_time += rounds * (fixed + exposed * (1.0 - is_flat)) + iters_l * ((rounds - 1.0) * it_f + it_l)
        phase = (rest * iters_l * request_step + 2.0 * workspace) / l2_bw
        hbm_bw_l = hbm_read * hbm_share[int(last if last < sm else sm) or 1]
        hbm_last = (iters_l * hbm_cost_step * ((rounds - 1.0) / hbm_bw + last / conc / hbm_bw_l) + workspace / hbm_bw
                    + (store - store_full + workspace) / hbm_write)  # fmt: skip
        if hbm_last > phase:
            phase = hbm_last
        if sm_time - sm_full > phase:
            phase = sm_time - sm_full
        kernel += phase
    if not is_split:
        return launch_fixed + grid * start_per_sm + kernel
    total = launch_fixed + tiles * split * start_per_sm + kernel
    partials = tiles * split * partial_tile
    chain = -(-tiles // sm) * reduce_chain
    if coop and tiles * split <= sm:
        chain *= coop_share  # a cooperative reduction (core.cost)
    spread = partials / (l2_bw if partials <= l2_eff else hbm_read)
    total += latency + (chain if chain > spread else spread)
    return total + tiles * elems * out_bytes / hbm_write
