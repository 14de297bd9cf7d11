"""Microsecond selection: the exact model on a few candidates instead of the whole space.

Per (profile, dtype, alignment class) the full model is evaluated once, vectorised, on a grid
of shapes (M, N, K at two points per octave, 1 .. 262144) and on the centres of its cells.  Each
cell keeps as candidates the configs that are best at any of its 8 corners or its centre (the
centre catches winners that wave quantization makes best only inside the cell), and each output
tile shape's best config at the centre or a corner when it is close to that point's best (TILE_SLACK: a
tile whose waves fill up only between the sample points).  Such a tile representative is an unconditional
candidate where it wins at a point of a small lattice inside the cell (INSIDE_SAMPLES); elsewhere it is
tried only for shapes where its work fills the SMs' program slots more evenly than at the centre (its
one advantage between the sample points), which keeps most of them out of a selection.  A new shape then
costs one cell lookup and the exact model (``core.scalar_time``) on those candidates, the one best
at the cell's centre first, the rest skipped when a lower bound of their cost (analytic, or the
lowest corner cost) already exceeds the best found.  A candidate within NEAR_TIE of the cell's
centre winner at every sample point (a near-twin there) is not kept.  Shapes outside the grid,
batched problems, and cells whose candidates are all illegal use the full vectorised path.  So the
pick is the model's exact argmin over the candidates; tests check it against the full argmin on
random shapes.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence

import numpy as np
from theodolite.kernels import config as kernel_config
from theodolite.kernels.config import (
    ALIGN_BYTES,
    ALIGN_COPY_MIN_REUSE,
    ASYNC_COPY_MIN_BYTES,
    DECODE_MAX_M,
    SCALAR_OFFSET_MAX_ROW,
    Problem,
    issued_widths,
    loads_class,
    partial_vectors_enabled,
)
from theodolite.model import core, grid_cache
from theodolite.model.memory import aligned_copy_time
from theodolite.model.predict import ConfigTable, alignment, choose_index, copy_time, fingerprint, scalar_widths

GRID_LOG2_MAX = 18  # grid points 2^0 .. 2^18 per dimension (vocabulary-sized N such as 128256 inside)
STEPS_PER_OCTAVE = 2  # grid points per factor of two (cell_index below assumes 2)
BOUND_MARGIN = 1.0 - 1e-9  # never prune a config whose bound ties the best (rounding)
BUILD_AFTER = 1  # build a class's grid on first use: the pick never depends on what was selected before
CANDIDATE_SLACK = 1.1  # a grid point keeps the configs within 10% of its best (up to CANDIDATE_RANKS of them)
# the cost of a config inside a cell is at least its lowest corner cost while the cost grows with M, N and K; a
# margin below 1 keeps configs whose cost falls slightly where that does not hold (Stream-K's remainder)
CORNER_BOUND = 0.9
GRID_CHUNK = 1024  # grid points per vectorised cost call while building (numpy temporaries of ~0.5 MB)
# a cell's candidate whose cost is within 0.1% of the centre winner's at all 9 sample points is dropped:
# near-twin configs (another variant or stage count of the same tile) alternate as winners by fractions
# of a percent, far below the model's error, and evaluating both costs ~25% of a selection
NEAR_TIE = 0.001
# a cell also keeps, per output tile shape (BLOCK_M x BLOCK_N), that tile's best config at the centre when it is within
# TILE_SLACK of the centre's best: wave quantization can make a tile best only between the sample points (dev167,
# 1006x2079x1772: 128x64 tiles fill exactly two per SM there, at no sample point), and the bounds in best_of
# discard such a tile cheaply where its waves are not favourable.  1.1 cut the fast path's misses of the exact
# argmin on 1200 random shapes from 19 to 11 (measured H100 profile; worst 0.89 -> 0.97) for ~4 us per selection,
# while every representative was tried wherever its bound allowed (4.35 cost evaluations per selection); tried only
# where they win inside the cell or fill the SMs better than at its centre: 2.3, for 11 misses (worst 0.969).  1.15
# since the TMA terms' first refit of 2026-11-27, where 1.1 left dev167's 128x64 tiles out of their
# cell (fast pick 128x256, 5% over the argmin in the model, 0.84 measured): 18 misses, worst 0.952 (1.1: 20, worst
# 0.896), for +0.4-1.0 us per new shape (10.7-10.8 -> 11.2-11.8 us median, `select --benchmark`, this host).  1.2
# since the H100's TMA terms' refit of 2026-11-27 (1.15: 25 misses; 1.2: 23, worst 0.945 either way;
# the validation suites' picks identical) for +0.2-0.5 us per new shape (12.7-12.8 -> 12.9-13.3 us, alternating runs).
# 1.4 (and CANDIDATE_RANKS 2, CANDIDATE_SLACK 1.1) since the model charges a launch the GPU's own gap (~1 us,
# launch_overhead_graph) instead of the host's ~20 us (2026-11-27): the predicted times of small and
# mid-sized shapes shrank several-fold, so the same absolute gaps became larger relative ones and the fast path kept
# fewer candidates (23 misses, worst 0.862: 11889x543x2896 tma 128x128 s6 for s3; dev167's 128x64 tiles out of their
# cell again).  1.3 alone: 21 misses, worst 0.901; with two ranks within 10%: 13, worst 0.928, but dev167's 128x64
# representative (33% over the centre's best there) still out; 1.4: the same 13 misses and dev167 tried, for
# 12.8-13.3 -> 14.2-14.8 us per new shape (`model.speed.measure`, this host at `sum(range(1000))` 8.8-9.6 us; 9.6-10.6
# us at the old constants), as read with the old launch figure before (13.3-15.2 us).  Since 2026-11-28 a tile's
# representatives come from the 8 corners as well as the centre: 806x2432x10880 (H200) fills 130 SMs with 64x256
# tiles but 140 at the centre (1.47x its best there, 1.11x at a corner), and the fast path took Stream-K 64x128, 17%
# over the argmin in the model (measured 1.006x) -- of the seen H200 sweeps' 1062 shapes 23 picks differed from the
# argmin (worst 0.829), now 7 (worst 0.961); the 1200 random shapes' misses stay 9, the worst 0.938 -> 0.979; for
# +0.3 us per new shape (12.2-12.5 -> 12.6-12.9 us median, `select --benchmark`, a 2-core x86 CPU)
TILE_SLACK = 1.4
# a tile representative stays a candidate only where it wins (within INSIDE_SLACK of the best) at one of
# INSIDE_SAMPLES^3 points inside the cell (a lattice in log space, between the corners and the centre)
INSIDE_SAMPLES = (2, 2, 1)  # along M, N, K (4, 4, 2: no fewer misses of the full argmin, 2x the build time)
INSIDE_SLACK = 1.0
CANDIDATE_RANKS = 2  # 2: each point keeps its two best within CANDIDATE_SLACK (1: ~2 us faster, more misses)

_TOP = GRID_LOG2_MAX * STEPS_PER_OCTAVE
_LOCK = threading.Lock()


class AlignmentClass:
    """One (table, load widths, output size, TMA legality) class: scalar config tuples, bounds, candidate grid."""

    def __init__(
        self, table: ConfigTable, a_vec: float, b_vec: float, out_bytes: int, tma_ok: bool, layout: str = ""
    ) -> None:
        self.table = table
        self.a_vec, self.b_vec, self.out_bytes, self.tma_ok = a_vec, b_vec, out_bytes, tma_ok
        self.layout = layout or "nn"  # the builds' layout: their residency and legality
        self.uses = 0
        loads = loads_class(a_vec, b_vec)
        # the residency of the binaries this class runs
        self.view = view = table.for_loads(loads, self.layout, out_bytes)
        per_program = core.per_program(table, a_vec, b_vec)
        self.per_program = per_program
        own = ("per_program", "stage_fill")  # this class's: its load widths
        columns = {name: getattr(view, name) for name in core.SCALAR_FIELDS if name not in own}
        columns["per_program"] = per_program
        columns["stage_fill"] = core.zero_fill(table, a_vec, b_vec)  # one stage at this class's widths (core.cost)
        if core.synchronous(a_vec, b_vec):  # latency not hidden, no prefetches (as core.cost)
            columns["lat_div"] = 1.0 / core.scalar_batches(table, a_vec, b_vec, table.hw)
            columns["stream"] = np.zeros(len(table.configs))
            columns["synchronous"] = np.ones(len(table.configs))
        self.scalar = [
            tuple(_number(columns[name] if name == "sm" else columns[name][i]) for name in core.SCALAR_FIELDS)
            for i in range(len(table.configs))
        ]
        self.hw = (table.hw.element_bytes, *table.hw_tuple[1:])
        # one tuple of shape-independent numbers per config for core.scalar_time (one shared function, not a closure
        # per config; per evaluation the two ran within the host's noise, ~6% apart)
        self.params = [core.scalar_params(fields, self.hw, out_bytes) for fields in self.scalar]
        # twin[i]: the first config whose cost equals config i's for every shape (and legality class)
        signature: dict[tuple[object, ...], int] = {}
        self.twin = [
            signature.setdefault(
                (*self.scalar[i], bool(table.is_tma[i]), table.configs[i].split_k, table.configs[i].block_k), i
            )  # fmt: skip
            for i in range(len(table.configs))
        ]
        # lower bound of core.cost per K-step: L2 requests, and the per-SM floor (Stream-K with more
        # programs than fit can beat the per-SM floor in its remainder phase: L2 only there)
        hw = table.hw
        l2_coef = table.panel * table.bk * hw.element_bytes / hw.l2_bandwidth
        loose = table.is_streamk & (table.launched > view.fit)
        floor = np.where(loose, 0.0, per_program / table.sm)
        coef = np.maximum(l2_coef, floor)
        # per wave, every work item needs at least iterations x (per_program + loop overhead) on its SM
        # (data-parallel variants; Stream-K's remainder is not counted)
        # (the latency term is at least an L2 hit's: core.cost's chain with the latency at its least)
        l2_min = hw.l2_latency_s if hw.hbm_latency_s >= hw.l2_latency_s else 0.0
        stream = np.asarray(columns["stream"], dtype=float)
        hide_min = (l2_min + stream) / np.asarray(columns["lat_div"], dtype=float)
        overhead = hw.iteration_overhead_s + table.it_extra
        chain_min = (
            np.maximum(per_program, hide_min) + overhead
            if core.synchronous(a_vec, b_vec)
            else np.maximum(per_program + overhead, np.maximum(stream, hide_min))
        )
        it_min = np.where(table.is_streamk, 0.0, chain_min)
        fixed_min = (hw.l2_latency_s if hw.hbm_latency_s >= hw.l2_latency_s else 0.0) + hw.tile_overhead_s
        fixed_min = fixed_min * (1.0 - table.flat_hide)  # a flattened loop hides this share (core.cost)
        # plus the epilogue (exactly core.cost's: the work item's tile written at one SM's bandwidth)
        fixed_min = fixed_min + table.elems * np.where(table.is_splitk, core.PARTIAL_BYTES, out_bytes) / hw.sm_bandwidth
        # the programs an SM holds share its matrix units and read ceiling: a K-step takes at least their count
        # times each one's share (core.cost's it_f), however well their latency hides
        per_sm = np.where(table.is_streamk, 0.0, np.maximum(per_program, stream))
        self.sm_count = sm_count = float(np.max(table.sm))
        self.bound = [
            (int(table.bm[i]), int(table.bn[i]), int(table.bk[i]), int(table.split[i]), float(coef[i]),
             int(view.slots[i]), int(table.pprog[i]), bool(table.is_splitk[i]), float(it_min[i]),
             float(table.launch_fixed[i]), float(fixed_min[i]), float(per_sm[i]), sm_count, float(table.prefetch[i]))
            for i in range(len(table.configs))
        ]  # fmt: skip
        self.grid: grid_cache.Grid | None = None
        self.splitk_limit = math.inf if table._splitk_limit is None else table._splitk_limit
        self.decode = [bool(x) for x in table.is_decode]  # legality's M rule, applied per shape in best_of
        # the binaries this class runs (scalar loads when an operand is misaligned and not copied): a config
        # whose binary spills or overflows shared memory is illegal for every shape of the class, so it must
        # not take a cell's candidate place (else whole cells fall back to the full space)
        builds = table.builds_for(loads, self.layout, out_bytes)
        smem = table.hw.limits.smem_bytes_per_block
        missing_ok = not table.require_builds  # a profile with builds refuses a config without one (legality)
        self.build_ok = np.array(
            [
                missing_ok if b is None else (b.n_spills <= kernel_config.SPILL_MAX_BYTES and b.shared_bytes <= smem)
                for b in builds
            ]
        )

    def build(self) -> grid_cache.Grid:
        """Candidates per grid cell: the (deduplicated) configs within CANDIDATE_SLACK of the best at any of its 8
        corners or at its centre, most likely winner first, each with a bound on its cost inside the cell."""
        if self.grid is not None:
            return self.grid
        key = self.cache_key()
        cached = grid_cache.load(key, _TOP**3, len(self.table.configs))
        if cached is not None:
            self.grid = cached
            return cached
        self.grid = self._build()
        grid_cache.save(key, self.grid)
        return self.grid

    def cache_key(self) -> str:
        """What this class's grid depends on beyond the code (grid_cache adds the code's digest)."""
        table = self.table
        return grid_cache.grid_key((
            fingerprint(table.profile), table.dtype, table.keys, table.hw, self.a_vec, self.b_vec, self.out_bytes,
            self.tma_ok, self.layout, GRID_LOG2_MAX, STEPS_PER_OCTAVE, CANDIDATE_SLACK, CORNER_BOUND, NEAR_TIE,
            CANDIDATE_RANKS, TILE_SLACK, INSIDE_SAMPLES, INSIDE_SLACK, kernel_config.SPILL_MAX_BYTES,
        ))  # fmt: skip

    def _build(self) -> grid_cache.Grid:
        top = _TOP
        points = 2.0 ** (np.arange(top + 1) / STEPS_PER_OCTAVE)
        centres = 2.0 ** ((np.arange(top) + 0.5) / STEPS_PER_OCTAVE)
        corner_times = self._times(points)
        centre_times = self._times(centres)
        near_corner = _near_best(corner_times)
        kept = _near_best(centre_times)
        # the centre's best config f of each cell; another winner of a sample point stays a candidate only if its
        # cost differs from f's by more than NEAR_TIE at some sample point (else the two are near-twins here)
        first = np.argmin(centre_times, axis=-1)[..., None]
        distinct = _differs(centre_times, first)
        low = np.full(kept.shape, np.inf)
        for a in (0, 1):
            for b in (0, 1):
                for c in (0, 1):
                    corner = corner_times[a : a + top, b : b + top, c : c + top]
                    near = near_corner[a : a + top, b : b + top, c : c + top]
                    kept |= near
                    distinct |= _differs(corner, first)
                    low = np.minimum(low, corner)
        is_first = np.zeros(kept.shape, dtype=bool)
        np.put_along_axis(is_first, first, True, axis=-1)
        kept &= distinct | is_first
        cond: np.ndarray = np.zeros(kept.shape, dtype=bool)
        if TILE_SLACK > 1.0:
            reps = self._tile_representatives(centre_times)
            for a in (0, 1):
                for b in (0, 1):
                    for c in (0, 1):
                        reps |= self._tile_representatives(corner_times[a : a + top, b : b + top, c : c + top])
            reps &= ~kept
            inside = self._win_inside(kept, reps) if INSIDE_SAMPLES else reps
            kept |= inside
            cond = reps & ~inside  # the rest: candidates only where their waves fill better than at the centre
        kept |= self._split_neighbours(kept)
        count = kept.shape[-1]
        kept = kept.reshape(-1, count)
        cond = cond.reshape(-1, count)
        low = low.reshape(-1, count) * CORNER_BOUND
        twin = np.array(self.twin)
        for i in np.flatnonzero(twin != np.arange(count)):  # twins cost the same: keep the first of each
            for mask in (kept, cond):
                mask[:, twin[i]] |= mask[:, i]
                mask[:, i] = False
        cond &= ~kept
        every = kept | cond
        # most likely winner first: the cost at the cell's centre; a candidate illegal there (the decode family on
        # a cell straddling DECODE_MAX_M, split-K past its K rule) last among the candidates, not among the rest
        order_key = np.where(every, np.minimum(centre_times.reshape(-1, count), np.finfo(float).max), np.inf)
        order = np.argsort(order_key, axis=1, kind="stable")
        sizes = every.sum(axis=1)
        ordered_low = np.take_along_axis(low, order, axis=1)
        used = np.arange(count)[None, :] < sizes[:, None]
        rows = np.repeat(np.arange(every.shape[0]), sizes)
        cfg, low_flat = order[used], ordered_low[used]
        fill = np.zeros(cfg.size)
        pick = np.flatnonzero(cond[rows, cfg])
        im, jn, lk = np.unravel_index(rows[pick], (top, top, top))
        fill[pick] = self._fill(centres[im], centres[jn], centres[lk], cfg[pick])
        triples = list(zip(cfg.tolist(), low_flat.tolist(), fill.tolist(), strict=True))
        ends = np.cumsum(sizes).tolist()
        return [tuple(triples[start:end]) for start, end in zip([0, *ends[:-1]], ends, strict=True)]

    def _fill(self, m: np.ndarray, n: np.ndarray, k: np.ndarray, cfg: np.ndarray) -> np.ndarray:
        """Work items / (waves x the busiest SM's programs x SMs) of each config at each shape: how evenly its work
        fills the SMs' program slots (as best_of computes it for a conditional candidate)."""
        table, view = self.table, self.view
        tiles = np.ceil(m / table.bm[cfg]) * np.ceil(n / table.bn[cfg])
        k_steps = np.ceil(k / table.bk[cfg])
        iters = np.ceil(k_steps / table.split[cfg])
        items = tiles * np.ceil(k_steps / iters)
        conc = np.minimum(np.where(table.is_splitk[cfg], items, np.minimum(tiles, table.pprog[cfg])), view.slots[cfg])
        sms = self.sm_count
        return items / (np.ceil(items / conc) * np.ceil(conc / sms) * sms)  # type: ignore[no-any-return]

    def _tile_representatives(self, point_times: np.ndarray) -> np.ndarray:
        """Per cell, each output tile shape's best config at one sample point (``point_times``: the centre's or a
        corner's) when within TILE_SLACK of that point's best."""
        table = self.table
        best = np.min(point_times, axis=-1, keepdims=True)
        close = point_times <= best * TILE_SLACK
        out = np.zeros(point_times.shape, dtype=bool)
        tiles = sorted({(int(bm), int(bn)) for bm, bn in zip(table.bm, table.bn, strict=True)})
        for bm, bn in tiles:
            members = np.flatnonzero((table.bm == bm) & (table.bn == bn))
            sub = point_times[..., members]
            pick = members[np.argmin(sub, axis=-1)]
            rep = np.zeros(point_times.shape, dtype=bool)
            np.put_along_axis(rep, pick[..., None], True, axis=-1)
            out |= rep & close
        return out

    def _win_inside(self, kept: np.ndarray, reps: np.ndarray) -> np.ndarray:
        """The tile representatives that win somewhere inside their cell: at one of INSIDE_SAMPLES^3 points of its
        interior (a lattice in log space), within INSIDE_SLACK of the best of the cell's candidates and
        representatives there.  Most representatives never do (their waves are not favourable anywhere in the
        cell), and each one kept costs a new shape's selection a bound or an evaluation."""
        top = kept.shape[0]
        count = kept.shape[-1]
        both = (kept | reps).reshape(-1, count)
        cell, cfg = np.nonzero(both)  # grouped by cell, in order
        if cell.size == 0:
            return reps
        starts = np.flatnonzero(np.r_[True, cell[1:] != cell[:-1]])
        group = np.cumsum(np.r_[False, cell[1:] != cell[:-1]])  # each pair's index into starts
        im, jn, lk = np.unravel_index(cell, (top, top, top))
        won = np.zeros(cell.size, dtype=bool)
        fm, fn, fk = ((np.arange(count_) + 0.5) / count_ for count_ in INSIDE_SAMPLES)
        for a in fm:
            for b in fn:
                for c in fk:
                    m = 2.0 ** ((im + a) / STEPS_PER_OCTAVE)
                    n = 2.0 ** ((jn + b) / STEPS_PER_OCTAVE)
                    k = 2.0 ** ((lk + c) / STEPS_PER_OCTAVE)
                    times = self._pair_times(m, n, k, cfg)
                    lowest = np.minimum.reduceat(times, starts)[group]
                    won |= times <= lowest * INSIDE_SLACK
        out = np.zeros(both.shape, dtype=bool)
        out[cell[won], cfg[won]] = True
        return reps & out.reshape(reps.shape)

    def _pair_times(self, m: np.ndarray, n: np.ndarray, k: np.ndarray, cfg: np.ndarray) -> np.ndarray:
        """The model (inf where illegal) for each (shape, config index) pair: the config arrays gathered per pair."""
        times = np.empty(cfg.size)
        with np.errstate(divide="ignore", invalid="ignore"):
            for s in range(0, cfg.size, GRID_CHUNK * 64):
                part = slice(s, s + GRID_CHUNK * 64)
                times[part] = self._legal_times(m[part], n[part], k[part], cfg[part])
        return times

    def _legal_times(self, m: np.ndarray, n: np.ndarray, k: np.ndarray, cfg: np.ndarray) -> np.ndarray:
        table = self.table
        view = _Gathered(self.view, cfg, len(table.configs))
        times, _ = core.cost(m, n, k, 1, self.a_vec, self.b_vec, self.out_bytes, view, table.hw, core.NumpyOps)
        legal = self._legal(m, n, k, cfg)
        return np.where(legal, times, np.inf)

    def _legal(self, m: np.ndarray, n: np.ndarray, k: np.ndarray, cfg: np.ndarray | slice) -> np.ndarray:
        """As legality for the class: the binary launches and fits, TMA where allowed, split-K's K and tile limits, the
        decode family's M (``cfg``: the config of each shape, or a slice of all configs for every shape)."""
        table = self.table
        legal = self.view.fit_ok[cfg] & self.build_ok[cfg] & (~table.is_tma[cfg] | self.tma_ok)
        split, bk = table.split[cfg], table.bk[cfg]
        legal = legal & ((split <= 1) | (split * bk <= k))
        legal = legal & (~table.is_decode[cfg] | (m <= DECODE_MAX_M))  # the decode family's M rule
        if table._splitk_limit is not None:  # legality's split-K tile limit
            tiles = np.ceil(m / table.bm[cfg]) * np.ceil(n / table.bn[cfg])
            legal = legal & (~table.is_splitk[cfg] | (tiles <= table._splitk_limit))
        return legal  # type: ignore[no-any-return]

    def _split_neighbours(self, kept: np.ndarray) -> np.ndarray:
        """Each kept split-K config's siblings (same tile, warps, stages) at half and twice its split and at the next
        split below and above it in the space (3 and 5 beside 4): a split's live slices, ceil(K-steps /
        ceil(K-steps / split)), step with K between the sample points, so the better of two neighbouring depths can
        change inside a cell (796x1x1099: k8 best, k4 kept; 3235x1x11398: k5 best, k4 kept)."""
        table = self.table
        groups: dict[tuple[int, ...], dict[int, int]] = {}
        for i, c in enumerate(table.configs):
            if c.variant == "splitk":
                groups.setdefault((c.block_m, c.block_n, c.block_k, c.num_warps, c.num_stages), {})[c.split_k] = i
        out = np.zeros(kept.shape, dtype=bool)
        for splits in groups.values():
            ordered = sorted(splits)
            for rank, split in enumerate(ordered):
                near = {split // 2, split * 2, *ordered[max(rank - 1, 0) : rank + 2]} - {split}
                for other in near & splits.keys():
                    out[..., splits[other]] |= kept[..., splits[split]]
        return out

    def _times(self, points: np.ndarray) -> np.ndarray:
        """The model (legal configs only, else inf) on every (M, N, K) of ``points`` cubed: shape (g, g, g, configs)."""
        table = self.table
        g = points.size
        m = np.repeat(points, g * g)[:, None]
        n = np.tile(np.repeat(points, g), g)[:, None]
        k = np.tile(points, g * g)[:, None]
        times = np.empty((m.shape[0], len(table.configs)))
        with np.errstate(divide="ignore", invalid="ignore"):
            for s in range(0, m.shape[0], GRID_CHUNK):  # chunks that stay in cache: ~4x faster than one pass
                part = slice(s, s + GRID_CHUNK)
                times[part], _ = core.cost(
                    m[part], n[part], k[part], 1, self.a_vec, self.b_vec, self.out_bytes, self.view, table.hw,
                    core.NumpyOps,
                )  # fmt: skip
        legal = self._legal(m, n, k, slice(None))
        return np.where(legal, times, np.inf).reshape(g, g, g, -1)

    def best_of(
        self, cands: tuple[tuple[int, float, float], ...], legal: Sequence[bool], m: int, n: int, k: int
    ) -> tuple[int, float | None] | None:
        """The exact model on the legal candidates: (index, seconds without copies), first index on ties.  Where one
        candidate alone survives legality and the fill test, its time is not computed (None): the pick needs no
        comparison, and the caller computes the time only if it is asked for."""
        params, bound, time, limit = self.params, self.bound, core.scalar_time, self.splitk_limit
        decode = self.decode if m > DECODE_MAX_M else None
        best_i, best_t = -1, math.inf
        pending = -1  # the first live candidate, evaluated only once a second one turns up
        for i, corner_low, centre_fill in cands:
            if not legal[i] or corner_low > best_t or (decode is not None and decode[i]):
                continue
            bm, bn, bk, split, coef, slots, pprog, is_split, it_min, launch, fixed_min, per_sm, sms, pre = bound[i]
            tiles = -(-m // bm) * -(-n // bn)
            iters = -(-k // bk)
            if is_split:
                # split-K's rules on the sizes (legality's; the legal masks leave them out): K deep enough for the
                # slices, few enough output tiles
                if tiles > limit or (split > 1 and split * bk > k):
                    continue
                k_steps = iters
                iters = -(-k_steps // split)
                items = tiles * -(-k_steps // iters)  # the slices holding K-steps (core.cost)
                conc = items
            else:
                items = tiles
                conc = tiles if tiles < pprog else pprog
            if conc > slots:
                conc = slots
            full = items // conc
            rest = items - full * conc
            # a tile representative that wins nowhere inside the cell is tried only where its work fills the SMs
            # more evenly than at the cell's centre (its wave quantization favourable between the sample points)
            if centre_fill and items <= centre_fill * (full + (rest > 0)) * -(-conc // sms) * sms:
                continue
            if best_i < 0:
                if pending < 0:
                    pending = i
                    continue
                best_i, best_t, pending = pending, time(params[pending], m, n, k), -1
                if corner_low > best_t:
                    continue
            lower = items * iters * coef
            if it_min:
                # the K-steps a prologue prefetched wait no latency (core.cost): only their SM's share counts
                pre_n = pre if pre < iters else iters
                bare = -(-conc // sms) * per_sm
                step = bare if bare > it_min else it_min
                waves_time = full * ((iters - pre_n) * step + pre_n * bare + fixed_min)
                if rest:  # the last wave's SMs hold fewer programs
                    bare = -(-rest // (rest if rest < sms else sms)) * per_sm
                    waves_time += (iters - pre_n) * (bare if bare > it_min else it_min) + pre_n * bare + fixed_min
                if waves_time > lower:
                    lower = waves_time
            if (launch + lower) * BOUND_MARGIN > best_t:
                continue
            t = time(params[i], m, n, k)
            if t < best_t or (t == best_t and i < best_i):
                best_i, best_t = i, t
        if pending >= 0:
            return pending, None
        return (best_i, best_t) if best_i >= 0 else None

    def time_of(self, i: int, m: int, n: int, k: int) -> float:
        """The model's time of config ``i`` (seconds, without copies): what best_of leaves out for a lone candidate."""
        return core.scalar_time(self.params[i], m, n, k)


class _Gathered:
    """A config table's arrays indexed by ``cfg`` (one config per evaluated shape); scalars as they are."""

    def __init__(self, view: ConfigTable, cfg: np.ndarray, count: int) -> None:
        self._view, self._cfg, self._count = view, cfg, count

    def __getattr__(self, name: str) -> object:
        value = getattr(self._view, name)
        if isinstance(value, np.ndarray) and value.shape[:1] == (self._count,):
            return value[self._cfg]
        return value


def _differs(times: np.ndarray, first: np.ndarray) -> np.ndarray:
    """Configs whose cost at a sample point differs from the cell's first candidate's by more than NEAR_TIE
    (either way; or where one of the two is illegal)."""
    at_first = np.take_along_axis(times, first, axis=-1)
    with np.errstate(invalid="ignore"):
        return ~(np.abs(times - at_first) <= NEAR_TIE * at_first)


def _near_best(times: np.ndarray) -> np.ndarray:
    """Per point: the CANDIDATE_RANKS fastest configs that are within CANDIDATE_SLACK of the fastest."""
    ranked = np.sort(times, axis=-1)
    cut = np.minimum(ranked[..., :1] * CANDIDATE_SLACK, ranked[..., CANDIDATE_RANKS - 1 : CANDIDATE_RANKS])
    return times <= cut


def _number(value: object) -> float | int:
    """Integral fields as Python ints (faster floor division), the rest as floats."""
    number = float(value)  # type: ignore[arg-type]
    return int(number) if number.is_integer() and abs(number) < 2**53 else number


_CLASSES: dict[tuple[int, float, float, int, bool, str], AlignmentClass] = {}


def alignment_class(
    table: ConfigTable, a_vec: float, b_vec: float, out_bytes: int, tma_ok: bool, layout: str = ""
) -> AlignmentClass:
    layout = table.build_layout(loads_class(a_vec, b_vec), layout, out_bytes)  # one grid where builds agree
    key = (id(table), a_vec, b_vec, out_bytes, tma_ok, layout)
    found = _CLASSES.get(key)
    if found is None or found.table is not table:
        found = AlignmentClass(table, a_vec, b_vec, out_bytes, tma_ok, layout)
        with _LOCK:
            _CLASSES[key] = found
    return found


def _step(x: int) -> int:
    """floor(2 log2 x), with integer bit tricks."""
    b = x.bit_length() - 1
    return 2 * b + (x * x >= 2 * (1 << b) * (1 << b))


# floor(2 log2 x) for every size below the grid's top, as one list lookup
def _steps(top: int) -> list[int]:
    """``_step`` of 0 .. top-1 in one vectorised pass (``_step(0)`` taken as 0); tests hold it equal to _step."""
    x = np.arange(top, dtype=np.int64)
    b = np.frexp(np.maximum(x, 1).astype(np.float64))[1].astype(np.int64) - 1  # floor(log2 x), exact below 2^53
    return (2 * b + (x * x >= np.left_shift(np.int64(2), 2 * b))).tolist()  # type: ignore[no-any-return]


_STEPS = _steps(1 << GRID_LOG2_MAX)


def cell_index(m: int, n: int, k: int) -> int | None:
    """Flat index of the grid cell holding (m, n, k); None outside the grid."""
    if m < 1 or n < 1 or k < 1:
        return None
    try:
        return (_STEPS[m] * _TOP + _STEPS[n]) * _TOP + _STEPS[k]
    except IndexError:
        return None


def choose_fast(table: ConfigTable, problem: Problem) -> tuple[int, float]:
    """(index, predicted seconds) of the model's pick: grid candidates when built, else the full space."""
    a_vec, b_vec, copies = alignment(problem, table.hw)
    mask = table.legal_mask(problem, shape_rules=False)  # best_of applies split-K's rules on the sizes
    m, n, k = problem.m, problem.n, problem.k
    cell = cell_index(m, n, k) if problem.batch == 1 else None
    if cell is not None:
        tma_ok = (problem.a_aligned or copies[0]) and (problem.b_aligned or copies[1])
        klass = alignment_class(table, a_vec, b_vec, problem.output_bytes, tma_ok, problem.layout)
        klass.uses += 1
        if klass.grid is not None or klass.uses >= BUILD_AFTER:
            found = klass.best_of(klass.build()[cell], mask, m, n, k)
            if found is not None:
                i, t = found
                t = klass.time_of(i, m, n, k) if t is None else t
                return i, t + copy_time(problem, copies, table.hw)
    i, times = choose_index(table, problem)
    return i, float(times[i])


def choose_ints(
    table: ConfigTable, m: int, n: int, k: int, layout: str, batch: int, out_bytes: int
) -> tuple[int, float] | None:
    """``choose_fast`` from plain ints (contiguous operands, no Problem object); None: use choose_fast.

    Mirrors ``Problem.a_aligned``/``b_aligned`` and ``needs_aligned_copy``; tests hold it equal to
    ``choose_fast``.
    """
    if batch != 1:
        return None
    return int_route(table, layout, out_bytes)(m, n, k)


class IntRoute:
    """``choose_ints`` for one (table, layout, output size), with everything that does not depend on the
    shape looked up once: a new shape then costs a few integer tests, one dict lookup of its legality and
    alignment class (keyed by a small int), the cell lookup and the exact model on the cell's candidates."""

    def __init__(self, table: ConfigTable, layout: str, out_bytes: int) -> None:
        self.table, self.layout, self.out_bytes = table, layout, out_bytes
        self.a_by_k = layout[0] == "n"  # A row-major: its rows are K elements long
        self.b_by_n = layout[1] == "n"
        # (alignment, copies) -> (legal mask without split-K's size rules, alignment class); filled from the tables
        # the slow path builds, so the first shape of a kind takes the slow path once
        self.routes: dict[int, tuple[tuple[bool, ...], AlignmentClass]] = {}
        self.e = table.hw.element_bytes
        self.scalar = scalar_widths(layout, table.hw, table.dtype)
        self.partial = partial_vectors_enabled()

    def __call__(self, m: int, n: int, k: int) -> tuple[int, float] | None:
        """(index, predicted seconds with copies) of the pick; None: the slow path must answer."""
        found = self.pick(m, n, k)
        if found is None or found[1] is not None:
            return found  # type: ignore[return-value]
        return found[0], self.time_of(found[0], m, n, k)

    def pick(self, m: int, n: int, k: int) -> tuple[int, float | None] | None:
        """As ``__call__``, but a lone live candidate's time is left out (None; ``time_of`` computes it)."""
        kind = self._kind(m, n, k)
        if kind is None:
            return None
        mask, klass, grid_index, copy_a, copy_b = kind
        found = klass.best_of(klass.grid[grid_index], mask, m, n, k)  # type: ignore[index]
        if found is None or found[1] is None or not (copy_a or copy_b):
            return found
        i, t = found
        e = self.e  # as copy_time
        return i, t + aligned_copy_time((m * k * e, k * n * e), (copy_a, copy_b), self.table.hw)

    def time_of(self, i: int, m: int, n: int, k: int) -> float:
        """The model's time of config ``i`` on this shape, its operands' aligned copies included."""
        kind = self._kind(m, n, k)
        if kind is None:  # pragma: no cover - pick answered this shape, so its kind is routed
            raise ValueError(f"{m}x{n}x{k} has no route")
        _, klass, _, copy_a, copy_b = kind
        t = klass.time_of(i, m, n, k)
        if copy_a or copy_b:
            e = self.e
            t += aligned_copy_time((m * k * e, k * n * e), (copy_a, copy_b), self.table.hw)
        return t

    def _kind(self, m: int, n: int, k: int) -> tuple[tuple[bool, ...], AlignmentClass, int, bool, bool] | None:
        """(legal mask, alignment class, grid cell, copy A, copy B) of a shape; None where the slow path answers."""
        if m < 1 or n < 1 or k < 1:
            return None
        e = self.e
        a_ext = k if self.a_by_k else m
        b_ext = n if self.b_by_n else k
        a_w = min(e * (a_ext & -a_ext), ALIGN_BYTES)  # widest vector dividing a (dense) row, as load_widths
        b_w = min(e * (b_ext & -b_ext), ALIGN_BYTES)
        if not self.partial:  # THEODOLITE_PARTIAL_VEC=0 when this selector was built: element-wise
            a_w = a_w if a_w == ALIGN_BYTES else e
            b_w = b_w if b_w == ALIGN_BYTES else e
        a_al = a_w == ALIGN_BYTES
        b_al = b_w == ALIGN_BYTES
        big = 2.0 * m * n * k >= kernel_config.ALIGN_COPY_MIN_FLOPS  # read at call time, as needs_aligned_copy
        copy_a = not a_al and ((big and n >= ALIGN_COPY_MIN_REUSE) or a_ext >= SCALAR_OFFSET_MAX_ROW)
        copy_b = not b_al and ((big and m >= ALIGN_COPY_MIN_REUSE) or b_ext >= SCALAR_OFFSET_MAX_ROW)
        code = ((copy_a + 2 * copy_b) * 32 + a_w) * 32 + b_w  # split-K's rules on the sizes: in best_of
        route = self.routes.get(code)
        if route is None:
            found = self._route(a_w, b_w, copy_a, copy_b)
            if found is None:
                return None
            route = self.routes[code] = found
        try:
            cell = (_STEPS[m] * _TOP + _STEPS[n]) * _TOP + _STEPS[k]
        except IndexError:
            return None
        return route[0], route[1], cell, copy_a, copy_b

    def _route(self, a_w: int, b_w: int, copy_a: bool, copy_b: bool) -> tuple[tuple[bool, ...], AlignmentClass] | None:
        """The legal mask and alignment class the slow path has built for this kind of shape, if it has
        (``a_w``/``b_w``: bytes of the widest vector dividing a row, up to 16)."""
        table = self.table
        a_al, b_al = a_w == ALIGN_BYTES, b_w == ALIGN_BYTES
        # as load_widths: a copied operand is aligned; element-wise beside element-wise
        a_eff, b_eff = issued_widths(ALIGN_BYTES if copy_a else a_w, ALIGN_BYTES if copy_b else b_w, self.e)
        loads = loads_class(a_eff, b_eff)  # as operand_loads
        mask = table._legal_tuple.get(
            (self.layout, a_al, b_al, (copy_a, copy_b), None, False, None, loads, None, self.out_bytes)
        )
        if mask is None:
            return None
        a_scalar, b_scalar = self.scalar
        klass = _CLASSES.get(
            (
                id(table),
                float(a_eff) if a_eff >= ASYNC_COPY_MIN_BYTES else a_scalar,  # as alignment
                float(b_eff) if b_eff >= ASYNC_COPY_MIN_BYTES else b_scalar,
                self.out_bytes,
                a_eff == ALIGN_BYTES and b_eff == ALIGN_BYTES,
                table.build_layout(loads, self.layout, self.out_bytes),
            )
        )
        if klass is None or klass.grid is None or klass.table is not table:
            return None
        return mask, klass


_ROUTES: dict[tuple[int, str, int], IntRoute] = {}


def int_route(table: ConfigTable, layout: str, out_bytes: int) -> IntRoute:
    """The cached IntRoute of (table, layout, output size)."""
    key = (id(table), layout, out_bytes)
    found = _ROUTES.get(key)
    if found is None or found.table is not table:
        found = IntRoute(table, layout, out_bytes)
        with _LOCK:
            _ROUTES[key] = found
    return found
