"""Predict the time of every legal config for a problem, rank them, choose the fastest.

Per config (vectorised over the whole config space with numpy, so a new shape costs a few
microseconds):

    iteration = max(programs x (compute, shared memory, load issue), own work or latency + overhead)
    tile      = latency + tile overhead + iterations x iteration + store of the tile
    kernel    = full waves x tile(full wave) + tile(last, partial wave)
    total     = launches + aligned copies + kernel + split-K reduction (Stream-K reduces inside its kernel)

where a wave is the set of work items running at once (programs that fit on the SMs), and
every per-wave term is evaluated for the full waves and again for the smaller last wave.
"""

from __future__ import annotations

import bisect
import copy
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from theodolite.kernels.config import (
    ASYNC_COPY_MIN_BYTES,
    DECODE_MAX_M,
    DTYPE_BYTES,
    OUT_DTYPES,
    VARIANTS,
    ConfigError,
    GemmConfig,
    Problem,
    config_space,
    is_decode,
    legality,
    load_widths,
    loads_class,
    lookup_build,
    needs_aligned_copy,
    operand_loads,
)
from theodolite.model import compute, core, memory, occupancy
from theodolite.model.hardware import Hardware, hardware

from theodolite.errors import ProfileError, TheodoliteError
from theodolite.profile.schema import KERNEL_LOADS, KernelBuild, Profile, default_out_bytes

BOTTLENECKS = ("issue", "smem", "cache", "occupancy", "compute")
# row segments a K-step reads of an operand laid along K at or below which its HBM reads run at the short-row share
# (experiments/segment_rates.py: H200 nt weight streams, BLOCK_K 64 of bf16 1.04-1.09x the model, 128 and up 1.01)
SHORT_ROW_BYTES = 128
# A config whose SMs are on average less busy than this over its waves is "occupancy"-bound.
OCCUPANCY_BOUND_BELOW = 0.75

_TERM_NAMES = (
    "launch", "copy", "sm_time", "mem_time", "l2_time", "hbm_time", "fixup", "iter_compute", "iter_smem",
    "iter_l2", "iter_hbm", "iter_issue", "iter_latency", "iter_total", "fixed_per_item", "zero_fill", "pipeline_fill",
    "#tiles", "#items", "#concurrent", "#waves", "#last_wave_busy", "#sm_busy", "#l2_hit", "#resident_per_sm",
    "#iterations", "#tail_split",
)  # fmt: skip
_TERMS = ("compute", "smem", "l2", "hbm", "issue", "latency")
_TERM_CLASS = {
    "compute": "compute",
    "smem": "smem",
    "l2": "cache",
    "hbm": "cache",
    "issue": "issue",
    "latency": "issue",
}


class NoLegalConfigError(TheodoliteError):
    """No config of the space can run the problem on this hardware."""


class MissingBuildsError(NoLegalConfigError, ProfileError):
    """The profile has compiler facts, but none for the problem's dtype: no config can be shown to fit."""


@dataclass(frozen=True)
class Prediction:
    """The model's estimate for one (problem, config)."""

    config: GemmConfig
    time_s: float
    tflops: float
    bottleneck: str
    breakdown: dict[str, float] = field(default_factory=dict)  # seconds
    details: dict[str, float] = field(default_factory=dict)  # counts and fractions (waves, busy, hit rate)

    @property
    def key(self) -> str:
        return self.config.key


class ConfigTable:
    """Per (profile, dtype, variants): the config space as arrays, with shape-independent costs precomputed."""

    def __init__(
        self,
        profile: Profile,
        dtype: str,
        variants_: tuple[str, ...] | None = None,
        extra: Sequence[GemmConfig] = (),
    ) -> None:
        """``extra``: configs priced beside the space though selection never offers them (calibration probes time
        twins that isolate one term, e.g. a flattened config's plain loop); last in the arrays."""
        self.profile = profile
        self.dtype = dtype
        self.hw: Hardware = hardware(profile, dtype)
        hw = self.hw
        limits = hw.limits
        configs = config_space(dtype, variants_)
        known = {c.key for c in configs}
        configs = (*configs, *{c.key: c for c in extra if c.key not in known}.values())
        self.configs: tuple[GemmConfig, ...] = configs
        self.keys = tuple(c.key for c in configs)
        self.index = {key: i for i, key in enumerate(self.keys)}
        # compiler facts per (load class, layout, output bytes), gathered on first use (builds_for); a profile with
        # any builds refuses a config without one (legal_mask), a profile with none (datasheet) is estimated
        self.require_builds = profile.has_builds()
        self.out_bytes_default = default_out_bytes(dtype)
        self._lock = threading.Lock()
        self._builds: dict[tuple[str, str, int], list[KernelBuild | None]] = {}
        self._canonical: dict[tuple[str, str, int], str] = {}
        builds = self.builds_for("vector")
        self.builds = builds
        # the binaries of misaligned, uncopied operands (8-/4-byte vectors, element-wise loads), layout nn at the
        # default output: they may spill where the vector ones do not (config.lookup_build: the nearest a profile has)
        self.builds_by_loads = {loads: self.builds_for(loads) for loads in KERNEL_LOADS}

        def arr(values: Sequence[float]) -> np.ndarray:
            return np.array(values, dtype=np.float64)

        self.bm = arr([c.block_m for c in configs])
        self.bn = arr([c.tile_n for c in configs])  # the output tile's columns (a composite tile's two parts)
        bn1 = arr([c.block_n1 for c in configs])
        self.bk = arr([c.block_k for c in configs])
        self.gm = arr([c.group_m for c in configs])
        self.stages = arr([(b.num_stages if b is not None and b.num_stages > 0 else c.num_stages) for c, b in
                           zip(configs, builds, strict=False)])  # fmt: skip
        self.split = arr([c.split_k for c in configs])
        self.is_tma = np.array([c.variant == "tma" for c in configs])
        # a flattened tile loop hides this share of each further work item's fixed cost (core.cost)
        self.flat_hide = arr([hw.flatten_hiding if c.flatten else 0.0 for c in configs])
        self.is_streamk = np.array([c.variant == "streamk" for c in configs])
        self.is_splitk = np.array([c.variant == "splitk" for c in configs])
        self.is_decode = np.array([is_decode(c, dtype) for c in configs])  # legal only for M <= DECODE_MAX_M
        self.launched = arr([occupancy.launched_per_sm(c, dtype, limits) for c in configs])
        # programs resident per SM, from the binary that runs: each load class (and layout, output size) has its own
        # registers and shared memory (an element-wise build keeps one stage but more registers), so its own
        # residency (for_loads)
        self._fit: dict[tuple[str, str, int], np.ndarray] = {}
        self.fit = self._fit_of("vector", "nn", self.out_bytes_default)
        self.fit_ok = self.fit >= 1
        self.fit = np.maximum(self.fit, 1.0)
        self._views: dict[tuple[str, str, int], ConfigTable] = {("vector", "nn", self.out_bytes_default): self}
        # --- what core.cost reads (arrays here; one scalar namespace per config for the fast path) ---
        self.is_sk = self.is_streamk.astype(np.float64)
        self.is_split = self.is_splitk.astype(np.float64)
        self.elems = self.bm * self.bn
        self.panel = self.bm + self.bn
        self.warps = arr([c.num_warps for c in configs])
        # a composite tile's two dots: each part's instructions, and the A tile read from shared memory once per part
        self.compute_it = compute.compute_time(self.bm, self.bn - bn1, self.bk, hw, self.warps) + compute.compute_time(
            self.bm, bn1, self.bk, hw, self.warps
        )
        self.smem_it = compute.smem_time(self.bm, self.bn, self.bk, self.warps, hw) + compute.part_rereads(
            self.bm, bn1, self.bk, hw
        )
        self.issue_a, self.issue_b = compute.issue_coefficients(self.bm, self.bn, self.bk, self.is_tma, hw)
        self.narrow_a, self.narrow_b = compute.narrow_coefficients(self.bm, self.bn, self.bk, self.is_tma, hw)
        # the share of the (stages - 1) prefetched K-steps whose latency overlaps: model_latency_hiding for
        # pointer-based (cp.async) pipelines, model_tma_latency_hiding for TMA ones (fitted apart: on the H100 a
        # TMA s3 build waits on the same loaded latency as a cp.async one; experiments/model_checks.py
        # tma-pairs)
        hiding = np.where(self.is_tma, hw.tma_latency_hiding, hw.latency_hiding)
        self.lat_div = np.maximum((self.stages - 1.0) * hiding, 1.0)
        self.sm = float(hw.sm_count)
        # one program's K-step bytes at one SM's streaming ceiling (its copy path, measured alone; TMA copies' over
        # model_tma_stream_scale: H200, 8-stage TMA 64x128 tiles stream 150 GB/s per SM against the pointer-based
        # read probe's 90)
        self.stream = self.panel * self.bk * hw.element_bytes / hw.sm_stream_bandwidth
        self.stream = np.where(self.is_tma, self.stream / hw.tma_stream_scale, self.stream)
        # from here on ``panel`` is the L2's share of a K-step (core.cost's L2 terms, fast.py's): a TMA kernel's rows
        # and columns over model_tma_l2_bandwidth_scale, since its bulk copies reach another share of the L2's
        # bandwidth than pointer-based tile loads (H200: same-config TMA / pointer pairs on L2-bound shapes measure
        # 0.89x, experiments/model_checks.py tma-bounds)
        self.panel = np.where(self.is_tma, self.panel / hw.tma_l2_bandwidth_scale, self.panel)
        self.synchronous = np.zeros(len(configs))  # scalar-load classes (model.fast) set their own
        # HBM bytes of an operand read along K in rows of SHORT_ROW_BYTES or less a K-step cost 1 / the short-row
        # read share (model_short_row_read_share, probed): per layout, so set per view (for_loads); none here
        self.short_row = self.bk * hw.element_bytes <= SHORT_ROW_BYTES
        self.a_read = np.ones(len(configs))
        self.b_read = np.ones(len(configs))
        self.launch_fixed = hw.launch_kernel_s + np.where(self.is_tma, hw.tma_launch_extra_s, 0.0)
        self.it_extra = np.where(self.is_tma, hw.tma_iteration_overhead_s, 0.0)  # beyond iteration_overhead_s
        self.it_extra = self.it_extra + np.where(bn1 > 0, hw.composite_iteration_overhead_s, 0.0)
        # a cp.async pipeline's prologue issues stages - 1 prefetches whether or not the K loop has that many steps:
        # the pipeliner folds the loop condition into the copy's mask, and a masked cp.async zero-fills its part of
        # the stage, with no iteration to overlap (a loop's own masked prefetches overlap its matrix work): each
        # warp-wide copy takes model_zero_fill_cycles whatever its width, so a stage costs its copies (core.zero_fill:
        # fill_per_row per row of an operand, over the operand's copy width in bytes).  TMA copies are skipped by
        # predicate instead.  A plain loop pays it per work item, a flattened one once per program (core.cost)
        self.prefetch = self.stages - 1.0
        copy_s = hw.zero_fill_copy_s / hw.warp_size  # one lane's share of a warp-wide masked copy
        self.fill_per_row = np.where(self.is_tma, 0.0, self.bk * hw.element_bytes * copy_s)
        self.is_flat = np.array([1.0 if c.flatten else 0.0 for c in configs])
        self.pprog = self.sm * self.launched  # grid of persistent variants (Stream-K: before the K cap)
        self.slots = self.sm * self.fit
        self.hw_tuple = core.hardware_tuple(hw)
        # output element bytes per out_dtype (None: the Problem default for this input dtype)
        self.out_bytes = {None: self.out_bytes_default, **{name: DTYPE_BYTES[name] for name in OUT_DTYPES}}
        # legality refuses split-K when the output already has many tiles (kernels' SPLITK_MAX_WAVES)
        from theodolite.kernels import config as kernel_config

        waves = getattr(kernel_config, "SPLITK_MAX_WAVES", None)
        self._splitk_limit = None if waves is None else waves * limits.sm_count
        self._splitk_tiles = sorted({(c.block_m, c.block_n) for c in configs if c.variant == "splitk"})
        self._splitk_none = tuple(False for _ in self._splitk_tiles)
        self._splitk_all = tuple(True for _ in self._splitk_tiles)
        bms = [bm for bm, _ in self._splitk_tiles] or [1]
        bns = [bn for _, bn in self._splitk_tiles] or [1]
        self._splitk_extremes = ((min(bms), min(bns)), (max(bms), max(bns)))
        self._k_thresholds = sorted({int(s * k) for s, k in zip(self.split, self.bk, strict=False) if s > 1})
        self._legal: dict[tuple[object, ...], np.ndarray] = {}
        self._legal_tuple: dict[tuple[object, ...], tuple[bool, ...]] = {}
        self.selections = 0  # fast-path use count (model.fast builds its grid after a few)

    def builds_for(self, loads: str, layout: str = "", out_bytes: int = 0) -> list[KernelBuild | None]:
        """The profile's build of every config for a load class, layout ("": nn) and output bytes (0: the default)."""
        key = (loads, layout or "nn", out_bytes or self.out_bytes_default)
        found = self._builds.get(key)
        if found is None:
            found = [lookup_build(self.profile, c, self.dtype, *key) for c in self.configs]
            with self._lock:
                self._builds[key] = found
        return found

    def build_layout(self, loads: str, layout: str, out_bytes: int) -> str:
        """``layout``, or "nn" where its builds are nn's (older profiles' builds serve every layout) and its operands'
        rows run as nn's do or short rows cost nothing extra (for_loads): problems of the two then share one view and
        one candidate grid (model.fast) instead of two equal ones."""
        key = (loads, layout or "nn", out_bytes or self.out_bytes_default)
        found = self._canonical.get(key)
        if found is None:
            nn = self.builds_for(loads, "nn", key[2])
            same = all(x is y for x, y in zip(self.builds_for(*key), nn, strict=True))
            same = same and (key[1] == "nn" or self.hw.short_row_read_share == 1.0)
            found = self._canonical[key] = "nn" if same else key[1]
        return found

    def _fit_of(self, loads: str, layout: str, out_bytes: int) -> np.ndarray:
        """Programs of each config resident per SM, from its build for (loads, layout, output bytes)."""
        key = (loads, layout or "nn", out_bytes or self.out_bytes_default)
        found = self._fit.get(key)
        if found is None:
            limits = self.hw.limits
            builds = self.builds_for(*key)
            found = np.array(
                [
                    occupancy.resident_per_sm(c, self.dtype, limits, b)
                    for c, b in zip(self.configs, builds, strict=True)
                ],
                dtype=np.float64,
            )
            with self._lock:
                self._fit[key] = found
        return found

    def for_loads(self, loads: str, layout: str = "", out_bytes: int = 0) -> ConfigTable:
        """This table as the ``loads`` class's binaries (for ``layout`` and ``out_bytes``; "" and 0: nn, the default
        output) run it: the same arrays, with their residency (``fit``, ``fit_ok``, ``slots``) read from those
        builds."""
        key = (loads, layout or "nn", out_bytes or self.out_bytes_default)
        view = self._views.get(key)
        if view is None:
            view = copy.copy(self)
            fit = self._fit_of(*key)
            view.fit_ok = fit >= 1
            view.fit = np.maximum(fit, 1.0)
            view.slots = self.sm * view.fit
            # an operand whose rows run along K (A in layouts n?, B in ?t) reads a row segment of BLOCK_K a step
            slow = np.where(self.short_row, 1.0 / self.hw.short_row_read_share, 1.0)
            view.a_read = slow if key[1][0] == "n" else np.ones(len(self.configs))
            view.b_read = slow if key[1][1] == "t" else np.ones(len(self.configs))
            with self._lock:
                self._views[key] = view
        return view

    # -- legality (exactly legality(), cached per class of problems that it cannot tell apart) --
    def splitk_crowded(self, m: int, n: int, batch: int) -> tuple[bool, ...]:
        """Per split-K tile shape: too many output tiles for split-K (legality's SPLITK_MAX_WAVES rule)."""
        limit = self._splitk_limit
        if limit is None:
            return ()
        small, large = self._splitk_extremes  # most and fewest tiles of the split-K shapes
        if batch * -(-m // small[0]) * -(-n // small[1]) <= limit:
            return self._splitk_none
        if batch * -(-m // large[0]) * -(-n // large[1]) > limit:
            return self._splitk_all
        return tuple(batch * -(-m // bm) * -(-n // bn) > limit for bm, bn in self._splitk_tiles)

    def legal_mask(self, problem: Problem, shape_rules: bool = True) -> np.ndarray:
        """legality() of every config for ``problem``, cached per kind of problem it cannot tell apart;
        ``shape_rules=False``: without split-K's rules on the sizes (``model.fast.best_of`` applies them), so one
        mask serves every size of the kind."""
        copies = needs_aligned_copy(problem)
        loads = operand_loads(problem)
        key = (
            problem.layout,
            problem.a_aligned,
            problem.b_aligned,
            copies,
            bisect.bisect_right(self._k_thresholds, max(problem.k, 1)) if shape_rules else None,
            problem.k == 0,
            self.splitk_crowded(problem.m, problem.n, problem.batch) if shape_rules else None,
            loads,
            problem.m <= DECODE_MAX_M if shape_rules else None,  # the decode family's M rule
            problem.output_bytes,
        )
        mask = self._legal.get(key)
        if mask is None:
            limits = self.hw.limits
            builds = self.builds_for(loads, problem.layout, problem.output_bytes)
            required = self.require_builds
            mask = (
                np.array(
                    [
                        legality(c, problem, limits, b, shape_rules, required) is None
                        for c, b in zip(self.configs, builds, strict=True)
                    ]
                )
                & self.for_loads(loads, problem.layout, problem.output_bytes).fit_ok
            )
            mask.setflags(write=False)
            with self._lock:
                self._legal[key] = mask
                self._legal_tuple[key] = tuple(bool(x) for x in mask)
        return mask


_TABLES: dict[tuple[str, str, tuple[str, ...] | None], ConfigTable] = {}
_TABLES_LOCK = threading.Lock()


def clear_tables() -> None:
    """Forget every cached table (after a model-parameter change)."""
    from theodolite.model import fast

    with _TABLES_LOCK:
        _TABLES.clear()
    fast._CLASSES.clear()
    fast._ROUTES.clear()
    try:
        from theodolite import api
    except ImportError:  # pragma: no cover
        return
    api.clear_caches()


def fingerprint(profile: Profile) -> str:
    """The profile's fingerprint, hashed once per Profile object."""
    value = profile.__dict__.get("_theodolite_fingerprint")
    if value is None:
        value = profile.fingerprint
        object.__setattr__(profile, "_theodolite_fingerprint", value)
    return value


def table_for(profile: Profile, dtype: str, variants_: tuple[str, ...] | None = None) -> ConfigTable:
    """The cached config table of a profile (by fingerprint and origin) for a dtype."""
    key = (fingerprint(profile) + profile.origin, dtype, variants_)
    table = _TABLES.get(key)
    if table is None:
        table = ConfigTable(profile, dtype, variants_)
        with _TABLES_LOCK:
            _TABLES[key] = table
    return table


def alignment(problem: Problem, hw: Hardware | None = None) -> tuple[float, float, tuple[bool, bool]]:
    """Bytes per load instruction of A and B as the kernel will run them, and the aligned copies gemm() makes.

    4- and 8-byte vectors of misaligned rows are what they are; narrower (element-wise, synchronous) loads
    get an effective width from ``hw`` (its model_scalar_load_cost; None: the profile-less default).
    """
    a_vec, b_vec, copies, _ = alignment_and_loads(problem, hw)
    return a_vec, b_vec, copies


def alignment_and_loads(problem: Problem, hw: Hardware | None = None) -> tuple[float, float, tuple[bool, bool], str]:
    """``alignment`` and the load class of the binary that runs (``operand_loads``), from one look at the rows."""
    copies = needs_aligned_copy(problem)
    a_scalar, b_scalar = scalar_widths(problem.layout, hw, problem.dtype)
    a_w, b_w = load_widths(problem)
    a_vec = float(a_w) if a_w >= ASYNC_COPY_MIN_BYTES else a_scalar
    b_vec = float(b_w) if b_w >= ASYNC_COPY_MIN_BYTES else b_scalar
    return a_vec, b_vec, copies, loads_class(a_w, b_w)


def scalar_widths(layout: str, hw: Hardware | None, dtype: str) -> tuple[float, float]:
    """Effective bytes per load instruction of misaligned A and B: A's rows run along K when it is row-major
    (layout "n."), B's when it is column-major (".t"); the others run along M or N."""
    along_mn, along_k = (hw.scalar_vec, hw.scalar_vec_k) if hw is not None else _default_scalar_vec(dtype)
    return (along_k if layout[0] == "n" else along_mn), (along_k if layout[1] == "t" else along_mn)


def _default_scalar_vec(dtype: str) -> tuple[float, float]:
    """Effective bytes per load instruction of a misaligned operand without a profile (override or default):
    rows along M or N, rows along K."""
    from theodolite.model.hardware import _OVERRIDES, MODEL_PARAMETERS

    def value(name: str) -> float:
        return _OVERRIDES.get(name, MODEL_PARAMETERS[name][0])

    cost = value("model_scalar_load_cost")
    return DTYPE_BYTES[dtype] / cost, DTYPE_BYTES[dtype] / (cost * value("model_scalar_k_load_share"))


def copy_time(problem: Problem, copies: tuple[bool, bool], hw: Hardware) -> float:
    if not (copies[0] or copies[1]):
        return 0.0
    e = problem.element_bytes
    sizes = (problem.batch * problem.m * problem.k * e, problem.batch * problem.k * problem.n * e)
    return memory.aligned_copy_time(sizes, copies, hw)


def evaluate(table: ConfigTable, problem: Problem, detail: bool = False) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Predicted seconds of every config of ``table`` for ``problem`` (legal or not), and term arrays."""
    hw = table.hw
    m, n, k, batch = problem.m, problem.n, problem.k, problem.batch
    a_vec, b_vec, copies, loads = alignment_and_loads(problem, hw)
    copy_s = copy_time(problem, copies, hw)
    if m == 0 or n == 0 or k == 0 or batch == 0:
        base = np.full(table.bm.shape, hw.launch_s)
        if not detail:
            return base, {}
        zero = np.zeros(table.bm.shape)
        terms = {name: zero for name in _TERM_NAMES}
        terms.update({"launch": base, "#sm_busy": zero + 1.0, "#last_wave_busy": zero + 1.0, "#tail_split": zero + 1.0})
        return base, terms
    view = table.for_loads(loads, problem.layout, problem.output_bytes)
    total, terms = core.cost(m, n, k, batch, a_vec, b_vec, problem.output_bytes, view, hw, core.NumpyOps, detail)
    total = total + copy_s
    if detail:
        terms["copy"] = np.full(total.shape, copy_s)
    return total, terms


def _bottleneck(terms: dict[str, np.ndarray], i: int) -> str:
    """The paper's five classes, from the winner's terms."""
    if float(terms["#sm_busy"][i]) < OCCUPANCY_BOUND_BELOW:
        return "occupancy"
    if float(terms["mem_time"][i]) > float(terms["sm_time"][i]):
        return "cache"
    per_iteration = {name: float(terms[f"iter_{name}"][i]) for name in ("compute", "smem", "issue", "latency")}
    fixed = float(terms["launch"][i] + terms["fixup"][i] + terms["copy"][i])
    if fixed > 0.5 * float(terms["sm_time"][i]):
        return "issue"  # launches and fix-ups dominate
    return _TERM_CLASS[max(per_iteration, key=lambda name: per_iteration[name])]


def _prediction(
    table: ConfigTable, problem: Problem, times: np.ndarray, terms: dict[str, np.ndarray], i: int
) -> Prediction:
    seconds = float(times[i])
    breakdown = {name: float(v[i]) for name, v in terms.items() if not name.startswith("#")}
    details = {name[1:]: float(v[i]) for name, v in terms.items() if name.startswith("#")}
    tflops = problem.flops / seconds / 1e12 if seconds > 0 else 0.0
    return Prediction(table.configs[i], seconds, tflops, _bottleneck(terms, i), breakdown, details)


def _order(times: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Legal indices fastest first; exact ties broken by config-space order (as choose's argmin)."""
    legal = np.flatnonzero(mask)
    return legal[np.lexsort((legal, times[legal]))]


def predict(problem: Problem, config: GemmConfig, profile: Profile) -> Prediction:
    """The model's time for one config (legal or not: legality is rank()'s job)."""
    variants_ = None if config.variant in VARIANTS else (config.variant,)
    table = table_for(profile, problem.dtype, variants_)
    i = table.index.get(config.key)
    if i is None:
        raise ConfigError(f"config {config.key} is not in the {problem.dtype} config space")
    times, terms = evaluate(table, problem, detail=True)
    return _prediction(table, problem, times, terms, i)


def rank(problem: Problem, profile: Profile, variants: tuple[str, ...] | None = None) -> list[Prediction]:
    """Every legal config, fastest first (deterministic tie-break by config-space order)."""
    table = table_for(profile, problem.dtype, variants)
    times, terms = evaluate(table, problem, detail=True)
    order = _order(times, table.legal_mask(problem))
    return [_prediction(table, problem, times, terms, int(i)) for i in order]


def choose_index(table: ConfigTable, problem: Problem) -> tuple[int, np.ndarray]:
    """Fast path: index of the fastest legal config and the time array."""
    times, _ = evaluate(table, problem)
    mask = table.legal_mask(problem)
    masked = np.where(mask, times, math.inf)
    i = int(np.argmin(masked))  # first minimum: ties go to config-space order
    if not mask[i]:
        profile = table.profile
        if table.require_builds and not any(b is not None for b in table.builds_for("vector", problem.layout)):
            from theodolite.kernels.build import BUILD_MATRIX

            if problem.layout not in BUILD_MATRIX[problem.dtype][0] and "" not in BUILD_MATRIX[problem.dtype][0]:
                raise MissingBuildsError(
                    f"{profile.origin}: {problem.dtype} in layout {problem.layout} is not built "
                    f"(kernels.build.BUILD_MATRIX builds {', '.join(BUILD_MATRIX[problem.dtype][0])}); "
                    f"pass the operands in one of those layouts"
                )
            raise MissingBuildsError(
                f"{profile.origin}: profile has no kernel builds for {problem.dtype} (layout {problem.layout}); run "
                f"python -m theodolite.probes.builds {profile.origin} --dtypes {problem.dtype}"
            )
        raise NoLegalConfigError(
            f"no config can run {problem.m}x{problem.n}x{problem.k} {problem.dtype} {problem.layout} "
            f"on {table.profile.device_name}"
        )
    return i, times


def choose(problem: Problem, profile: Profile, variants: tuple[str, ...] | None = None) -> Prediction:
    """The fastest legal config."""
    table = table_for(profile, problem.dtype, variants)
    i, _ = choose_index(table, problem)
    times, terms = evaluate(table, problem, detail=True)
    return _prediction(table, problem, times, terms, i)
