"""Public API: ``select`` (the model's pick for a problem) and ``matmul`` (select, then run the kernel).

Selections are cached per (problem, profile), so a repeated shape costs a dictionary lookup;
a new shape costs a cell lookup in the model's candidate grid and the exact model on its few candidates
(``theodolite.model.fast``; batched problems and shapes off the grid: one vectorised evaluation of the space).
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

from theodolite.kernels.config import LAYOUTS, OUT_DTYPES, GemmConfig, Problem
from theodolite.model.fast import IntRoute, choose_fast, int_route
from theodolite.model.predict import (
    ConfigTable,
    Prediction,
    _bottleneck,
    evaluate,
    fingerprint,
    rank,
    table_for,
)
from theodolite.profile.schema import Profile

EXPLAIN_TOP = 8
_LAYOUTS = frozenset(LAYOUTS)
_OUT = frozenset(OUT_DTYPES)


class Selection:
    """What the model picked for a problem on a profile, and why.

    The pick is computed by ``select``, and its predicted time wherever the pick needed a comparison; the time of a
    lone candidate, the bottleneck class and the ranked candidates (``explain``) are computed on first access, so
    selecting stays cheap.
    """

    __slots__ = ("_args", "_problem", "config", "_time", "_route", "_profile", "_table", "_index", "_bottleneck",
                 "_candidates")  # fmt: skip

    def __init__(self, args: tuple[Any, ...] | None, problem: Problem | None, config: GemmConfig,
                 predicted_time_s: float | None, profile: Profile, table: ConfigTable, index: int,
                 route: IntRoute | None = None) -> None:  # fmt: skip
        self._args = args
        self._problem = problem
        self.config = config
        self._time = predicted_time_s  # None: the fast path's lone candidate, timed on first access via ``route``
        self._route = route
        self._profile = profile
        self._table = table
        self._index = index
        self._bottleneck: str | None = None
        self._candidates: list[Prediction] | None = None

    def __repr__(self) -> str:
        p = self.problem
        return (
            f"Selection({p.m}x{p.n}x{p.k} {p.dtype} {p.layout} batch={p.batch}: {self.config.key}, "
            f"{self.predicted_time_s * 1e6:.2f} us, {self.predicted_tflops:.1f} TFLOP/s, {self.bottleneck}, "
            f"profile {self.profile_fingerprint})"
        )

    @property
    def problem(self) -> Problem:
        if self._problem is None:
            m, n, k, dtype, layout, batch, out_dtype = self._args  # type: ignore[misc]
            self._problem = Problem(m, n, k, dtype=dtype, layout=layout, batch=batch, out_dtype=out_dtype)
        return self._problem

    @property
    def predicted_time_s(self) -> float:
        """The model's time for the pick (seconds): GPU time as a kernel timing sees it (the host kept ahead, one
        launch at the profile's ``launch_overhead_graph``), not the wall time of an eager Python call, which adds the
        host's launch cost.  How close it comes: the "pick's predicted / measured time" row of ``validate --summary``.
        Where the pick needed no comparison, computed on first access."""
        if self._time is None:
            m, n, k = self._args[:3]  # type: ignore[index]
            self._time = self._route.time_of(self._index, m, n, k)  # type: ignore[union-attr]
        return self._time

    @property
    def variant(self) -> str:
        return self.config.variant

    @property
    def predicted_tflops(self) -> float:
        return self.problem.flops / self.predicted_time_s / 1e12 if self.predicted_time_s > 0 else 0.0

    @property
    def profile_fingerprint(self) -> str:
        return fingerprint(self._profile)

    @property
    def profile_device(self) -> str:
        return self._profile.device_name

    @property
    def bottleneck(self) -> str:
        if self._bottleneck is None:
            _, terms = evaluate(self._table, self.problem, detail=True)
            self._bottleneck = _bottleneck(terms, self._index)
        return self._bottleneck

    @property
    def candidates(self) -> list[Prediction]:
        """The top legal predictions, fastest first (computed on first use)."""
        if self._candidates is None:
            ranked = rank(self.problem, self._profile)
            # the pick first, even where the fast path's grid and the full ranking tie differently
            ranked.sort(key=lambda p: (p.config != self.config, p.time_s))
            self._candidates = ranked[:EXPLAIN_TOP]
        return self._candidates

    def explain(self, top: int = EXPLAIN_TOP) -> str:
        """A readable table of the top candidates with their time breakdown."""
        p = self.problem
        lines = [
            f"{p.m}x{p.n}x{p.k} {p.dtype} layout {p.layout} batch {p.batch} on {self.profile_device} "
            f"(profile {self.profile_fingerprint})",
            f"pick: {self.config.key}  predicted {self.predicted_time_s * 1e6:.1f} us, "
            f"{self.predicted_tflops:.1f} TFLOP/s, bound by {self.bottleneck}",
            "",
        ]
        header = (
            f"{'#':>2} {'config':<36} {'time us':>9} {'TFLOP/s':>8} {'bound':<9} {'waves':>5} {'busy':>5} "
            f"{'L2 hit':>6} | {'launch':>6} {'SMs':>8} {'memory':>8} {'fixup':>6} {'copy':>6} | "
            f"per iteration (ns): {'mma':>6} {'smem':>6} {'issue':>6} {'lat':>6} {'L2':>6} {'HBM':>6}"
        )
        lines.append(header)
        lines.append("-" * len(header))
        for rank_, c in enumerate(self.candidates[:top], 1):
            b, d = c.breakdown, c.details
            us = {name: b.get(name, 0.0) * 1e6 for name in ("launch", "sm_time", "mem_time", "fixup", "copy")}
            ns = {name: b.get(f"iter_{name}", 0.0) * 1e9 for name in ("compute", "smem", "issue", "latency", "l2",
                                                                        "hbm")}  # fmt: skip
            lines.append(
                f"{rank_:>2} {c.config.key:<36} {c.time_s * 1e6:>9.2f} {c.tflops:>8.1f} {c.bottleneck:<9} "
                f"{d.get('waves', 0):>5.0f} {d.get('sm_busy', 0):>5.2f} {d.get('l2_hit', 0):>6.2f} | "
                f"{us['launch']:>6.2f} {us['sm_time']:>8.2f} {us['mem_time']:>8.2f} {us['fixup']:>6.2f} "
                f"{us['copy']:>6.2f} | {'':>19} {ns['compute']:>6.1f} {ns['smem']:>6.1f} {ns['issue']:>6.1f} "
                f"{ns['latency']:>6.1f} {ns['l2']:>6.1f} {ns['hbm']:>6.1f}"
            )
        lines.append("")
        lines.append(
            "time = launch + aligned copy + fix-up + for the full waves, then the last: max(SMs: waves x (latency + "
            "iterations x max(programs x max(mma, smem, issue), latency/(stages-1))), memory: L2 requests / L2 bw, "
            "HBM misses + stores / HBM bw of the wave's SMs)"
        )
        defaults = self._table.hw.defaults_used
        if defaults:
            lines.append(
                f"model parameters not fitted in this profile (code defaults used): {', '.join(defaults)}; "
                "fit them with python -m theodolite.model.evaluate RESULTS --fit ... --write-profile P"
            )
        return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# profile resolution, cached: the default profile is resolved once per process (and env value)
# ---------------------------------------------------------------------------------------------
_DEFAULT: dict[str | None, Profile] = {}
_BY_PATH: dict[str, Profile] = {}


def resolve(profile: Profile | str | os.PathLike[str] | None) -> Profile:
    """None: the resolution order of theodolite.profile.load(); a path: that file; a Profile: as is."""
    if isinstance(profile, Profile):
        return profile
    if profile is None:
        env = os.environ.get("THEODOLITE_PROFILE")
        found = _DEFAULT.get(env)
        if found is None:
            from theodolite.profile import load

            found = _DEFAULT[env] = load()
        return found
    key = str(profile)
    found = _BY_PATH.get(key)
    if found is None:
        from theodolite.profile import load

        found = _BY_PATH[key] = load(Path(profile))
    return found


def _profile_key(profile: Profile | str | os.PathLike[str] | None) -> Any:
    if isinstance(profile, Profile):
        key = profile.__dict__.get("_theodolite_key")
        if key is None:  # computed once per Profile object (immutable)
            key = (fingerprint(profile), profile.origin)
            object.__setattr__(profile, "_theodolite_key", key)
        return key
    return (profile, os.environ.get("THEODOLITE_PROFILE")) if profile is None else str(profile)


_CACHE: dict[tuple[Any, ...], Selection] = {}
# (dtype, layout, batch, out_dtype, profile key) -> the fast route of a validated combination (batch 1 only)
_ROUTES: dict[tuple[Any, ...], IntRoute] = {}
_CACHE_LIMIT = 65536


def _select_problem(problem: Problem, prof: Profile, args: tuple[Any, ...] | None = None) -> Selection:
    table: ConfigTable = table_for(prof, problem.dtype)
    i, time_s = choose_fast(table, problem)
    return Selection(args, problem, table.configs[i], time_s, prof, table, i)


def select(
    M: int,
    N: int,
    K: int,
    *,
    dtype: str = "bf16",
    layout: str = "nn",
    batch: int = 1,
    out_dtype: str | None = None,
    profile: Profile | str | os.PathLike[str] | None = None,
) -> Selection:
    """The model's config for ``C[M,N] = A[M,K] @ B[K,N]`` on the profile's GPU (no kernel runs)."""
    pkey = _profile_key(profile)
    key = (M, N, K, dtype, layout, batch, out_dtype, pkey)
    found = _CACHE.get(key)
    if found is not None:
        return found
    route = _ROUTES.get(key[3:])  # validated (dtype, layout, batch 1, out_dtype, profile) combinations only
    found_fast = (
        route.pick(M, N, K) if route is not None and type(M) is int and type(N) is int and type(K) is int else None
    )
    if found_fast is not None:
        i, time_s = found_fast
        table = route.table  # type: ignore[union-attr]
        selection = Selection(key[:7], None, table.configs[i], time_s, table.profile, table, i, route)
    else:
        prof = resolve(profile)
        problem = Problem(M, N, K, dtype=dtype, layout=layout, batch=batch, out_dtype=out_dtype)  # validates
        table = table_for(prof, dtype)
        if batch == 1:
            _ROUTES[key[3:]] = int_route(table, layout, table.out_bytes[out_dtype])
        selection = _select_problem(problem, prof, key[:7])
    if len(_CACHE) >= _CACHE_LIMIT:
        _CACHE.clear()
    _CACHE[key] = selection
    return selection


def select_problem(problem: Problem, profile: Profile | str | os.PathLike[str] | None = None) -> Selection:
    """``select`` for a ready Problem (alignment flags included), cached per (problem, profile)."""
    prof = resolve(profile)
    key = (problem, _profile_key(prof))
    found = _CACHE.get(key)
    if found is None:
        found = _select_problem(problem, prof)
        if len(_CACHE) >= _CACHE_LIMIT:
            _CACHE.clear()
        _CACHE[key] = found
    return found


_MATMUL_CACHE: dict[tuple[Any, ...], tuple[GemmConfig, int, bool]] = {}
# (matmul's key, alpha, beta, scales' metadata) -> the launch cache's runner of a call with no out, c or bias that
# ran its pick: a repeat skips gemm()'s own key (~3 us of host time a call, issue 39)
_MATMUL_RUNNERS: dict[tuple[Any, ...], Any] = {}
_PLAIN_NUMBERS = (int, float)
# configs whose kernel failed to compile or launch in this process, per (profile, dtype, layout, loads, output size)
_FAILED: dict[tuple[Any, ...], set[str]] = {}
_WARNED: set[tuple[Any, ...]] = set()


class KernelFallbackWarning(UserWarning):
    """The model's pick failed to compile or launch here, and ``matmul`` ran its next legal config instead."""


def _k_major_copy(problem: Problem) -> Problem:
    """The problem with B copied K-major (layout ``?t``), as matmul does for fp8 B stored N-major."""
    return Problem(
        problem.m, problem.n, problem.k, dtype=problem.dtype, batch=problem.batch, layout=problem.layout[0] + "t",
        out_dtype=problem.out_dtype, a_row_stride_aligned=problem.a_row_stride_aligned,
    )  # fmt: skip


def _plan(problem: Problem, prof: Profile) -> tuple[GemmConfig, bool]:
    """The pick and whether B is copied K-major first.  fp8's tensor-core instructions (wgmma) read K-major B only:
    reading fp8 B stored N-major, Triton's dot measured 13x slower than torch._scaled_mm on K-major B (H100, 8192^3,
    issue 38), a penalty the model does not price.  So fp8 B stored N-major is always copied K-major (one read and
    write of B, ``copy_cost_s``) and the nt pick runs."""
    if problem.dtype.startswith("fp8") and problem.layout[1] == "n" and 0 not in (problem.m, problem.n, problem.k):
        return select_problem(_k_major_copy(problem), prof).config, True
    return select_problem(problem, prof).config, False


def copy_cost_s(problem: Problem, prof: Profile) -> float:
    """The model's time for matmul's K-major copy of fp8 B stored N-major (0 where none is made)."""
    from theodolite.model import memory

    if not problem.dtype.startswith("fp8") or problem.layout[1] != "n":
        return 0.0
    b_bytes = problem.batch * problem.k * problem.n * problem.element_bytes
    return memory.aligned_copy_time((0.0, b_bytes), (False, True), table_for(prof, problem.dtype).hw)


def matmul(
    a: Any,
    b: Any,
    *,
    out: Any = None,
    alpha: float = 1.0,
    beta: float = 0.0,
    c: Any = None,
    bias: Any = None,
    scale_a: Any = None,
    scale_b: Any = None,
    out_dtype: Any = None,
    profile: Profile | str | os.PathLike[str] | None = None,
) -> Any:
    """``alpha * a @ b + beta * c + bias`` with the model's config: a drop-in for torch.matmul on 2-D/3-D tensors.

    fp8 (``torch.float8_e4m3fn``/``float8_e5m2``, as ``torch._scaled_mm``): ``scale_a``/``scale_b`` are per-tensor
    scales (one-element float32 tensors, or floats) or rowwise ones (2-D problems: ``scale_a`` ``[M, 1]`` one per row
    of a, ``scale_b`` ``[1, N]`` one per column of b, float32), multiplied into the result in the kernel's epilogue
    on the device (never read on the host, so the call can be captured in a CUDA graph); the output is ``out_dtype``
    (``torch.bfloat16`` by default, ``float16`` or ``float32``).  B stored K-major (``w.t()`` of an ``[N, K]``
    weight, layout nt) is the fast path; B stored N-major is copied K-major first (``_plan``; ``copy_cost_s`` is
    the model's price of that copy).  If the pick fails to compile or launch here,
    the model's next legal config runs instead, with one ``KernelFallbackWarning``.
    """
    if out_dtype is None and out is not None:
        out_dtype = out.dtype
    key = (
        tuple(a.shape), a.stride(), a.dtype, a.storage_offset(), a.data_ptr() % 16,
        tuple(b.shape), b.stride(), b.dtype, b.storage_offset(), b.data_ptr() % 16,
        a.device, out_dtype, _profile_key(profile),
    )  # fmt: skip
    runner_key = None
    if out is None and c is None and bias is None and type(alpha) in _PLAIN_NUMBERS and type(beta) in _PLAIN_NUMBERS:
        scales = (None, None) if scale_a is None and scale_b is None else (_scale_meta(scale_a), _scale_meta(scale_b))
        if scales[0] is not False and scales[1] is not False:
            runner_key = (key, b.device, alpha, beta, *scales)  # gemm()'s launch key holds both devices
            runner = _MATMUL_RUNNERS.get(runner_key)
            if runner is not None:
                return runner(a, b, None, None, None, scale_a, scale_b)
    # looked up on the package at call time (the selection-speed benchmark swaps in a stub launcher)
    kernels: Any = importlib.import_module("theodolite.kernels")
    found = _MATMUL_CACHE.get(key)
    if found is None:
        prof = resolve(profile)
        problem = kernels.problem_of(a, b, out_dtype)
        if (scale_a is not None or scale_b is not None) and not problem.dtype.startswith("fp8"):
            raise kernels.ConfigError(f"scale_a/scale_b apply to fp8 inputs only, not {a.dtype}")
        config, transpose = _plan(problem, prof)
        found = (config, int(prof.value("sm_count")), transpose)
        if len(_MATMUL_CACHE) >= _CACHE_LIMIT:
            _MATMUL_CACHE.clear()
        _MATMUL_CACHE[key] = found
    config, sms, transpose = found
    if transpose:
        b = b.transpose(-1, -2).contiguous().transpose(-1, -2)  # K-major B

    def run(chosen: GemmConfig) -> Any:
        return kernels.gemm(
            a, b, chosen, out=out, alpha=alpha, beta=beta, c=c, bias=bias, out_dtype=out_dtype, num_sms=sms,
            a_scale=scale_a, b_scale=scale_b,
        )  # fmt: skip

    try:
        result = run(config)
    except Exception as error:
        if not kernels.is_launch_failure(error):
            raise
        return _fall_back(kernels, key, a, b, out_dtype, config, error, profile, run)
    if runner_key is not None and not transpose:
        runner = _cached_runner(a, b, config, alpha=alpha, beta=beta, out_dtype=out_dtype, num_sms=sms,
                                a_scale=scale_a, b_scale=scale_b)  # fmt: skip
        if runner is not None:
            if len(_MATMUL_RUNNERS) >= _CACHE_LIMIT:
                _MATMUL_RUNNERS.clear()
            _MATMUL_RUNNERS[runner_key] = runner
    return result


_SCALE_META: list[Any] = []  # launch_cache._scale_meta once imported (torch loads on first use only)


def _scale_meta(x: Any) -> Any:
    """launch_cache's metadata of an fp8 scale (None, a number's value, a tensor's; False: neither)."""
    if not _SCALE_META:
        from theodolite.kernels.launch_cache import _scale_meta as meta

        _SCALE_META.append(meta)
    return _SCALE_META[0](x)


def _cached_runner(a: Any, b: Any, config: GemmConfig, **kwargs: Any) -> Any:
    from theodolite.kernels.launch import cached_runner

    return cached_runner(a, b, config, **kwargs)


def _fall_back(
    kernels: Any, key: tuple[Any, ...], a: Any, b: Any, out_dtype: Any, failed: GemmConfig, error: Exception,
    profile: Any, run: Any,
) -> Any:  # fmt: skip
    """Run the model's next legal config after ``failed`` would not compile or launch; warn once per failed config."""
    from theodolite.kernels.config import operand_loads
    from theodolite.model.predict import NoLegalConfigError

    prof = resolve(profile)
    problem = kernels.problem_of(a, b, out_dtype)
    kind = (_profile_key(prof), problem.dtype, problem.layout, operand_loads(problem), problem.output_bytes)
    failed_keys = _FAILED.setdefault(kind, set())
    failed_keys.add(failed.key)
    reasons = [f"{failed.key}: {error}"]
    for prediction in rank(problem, prof):
        config = prediction.config
        if config.key in failed_keys:
            continue
        try:
            result = run(config)
        except Exception as again:
            if not kernels.is_launch_failure(again):
                raise
            failed_keys.add(config.key)
            reasons.append(f"{config.key}: {again}")
            continue
        if (kind, failed.key) not in _WARNED:
            _WARNED.add((kind, failed.key))
            import warnings

            warnings.warn(
                f"theodolite: {failed.key} failed for {problem.m}x{problem.n}x{problem.k} {problem.dtype} "
                f"{problem.layout} ({str(error)[:200]}); ran {config.key}, the model's next legal config",
                KernelFallbackWarning,
                stacklevel=3,
            )
        _MATMUL_CACHE[key] = (config, *_MATMUL_CACHE.get(key, (None, int(prof.value("sm_count")), False))[1:])
        return result
    raise NoLegalConfigError(
        f"no legal config compiled and launched for {problem.m}x{problem.n}x{problem.k} {problem.dtype} "
        f"{problem.layout}: " + "; ".join(reasons)[:1000]
    )


def clear_caches() -> None:
    """Forget cached selections (tests; a profile file replaced in place)."""
    _CACHE.clear()
    _ROUTES.clear()
    _MATMUL_CACHE.clear()
    _MATMUL_RUNNERS.clear()
    _FAILED.clear()
    _WARNED.clear()
    _DEFAULT.clear()
    _BY_PATH.clear()
