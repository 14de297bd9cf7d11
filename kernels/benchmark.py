"""Time every legal config (and torch.matmul, side by side) per shape; write ``theodolite.results`` JSON.

Two timing modes, the same for our configs and for torch.matmul:

- inputs that do not fit in L2: ``triton.testing.do_bench``'s method with bounded counts (each
  run preceded by an L2 flush, timed alone with CUDA events, median kept).  The flush reads a buffer
  four times the L2 (at least 256 MB), so the timed kernel finds the L2 full of clean lines, as a
  layer of a model finds it after the previous layer's weight reads.  do_bench's flush zeroes its
  buffer instead and leaves ~L2-size of dirty lines whose write-back the timed kernel pays: 3-10 µs on
  a memory-bound kernel of 15-60 µs (``experiments/flush_writeback.py``, H100; ``stream_ramp.py``, H200;
  ``Timer(flush="write")`` keeps it for comparisons);
- inputs that fit in L2 (tiny and small shapes, where a single flushed run of a few microseconds
  is mostly event and launch noise): ``rotated`` -- copies of the inputs that together exceed twice
  the L2 (at most 32: tiny inputs then stay in L2, for both) are cycled through, many calls back to
  back captured in a CUDA graph (ours: a plain ``gemm()`` call; torch's: ``torch.matmul(out=)``), and
  the median over several replays of the GPU time per call is kept.  Like do_bench's events this is
  the GPU's work (kernel boundaries included), not the host's launch cost, which is config-independent
  and, on a busy host, drifts by tens of percent within a sweep (``Timer.eager_batches`` times
  host-inclusive back-to-back calls; a shape whose calls cannot be captured falls back to it and says
  so under ``errors['@timing']``).

Every config gets one checked run first (output poisoned with NaN, compared against
torch.matmul).  A config already 3x slower than the best so far after its first timed runs stops
early (its median of those runs is kept): it cannot be the best.  In the rotated mode torch.matmul
and every config are timed together, their batches interleaved round by round
(``Timer.interleaved``), so host and clock drift during a shape's sweep falls on all of them alike.

``final_round`` times torch.matmul and a few configs (the sweep's fastest, the picks) again side by side
in both modes, every candidate once per round, so comparisons between them are not skewed by the
order of the sweep (a large GEMM heats the GPU and lowers its power-limited clock for the next one)
nor by the oracle being the minimum over ~100 noisy times.
"""

from __future__ import annotations

import math
import os
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch
import triton
from theodolite.kernels.config import GemmConfig, KernelLimits, Problem, legal_configs

_TORCH_DTYPES = {
    "fp16": torch.float16,
    "bf16": torch.bfloat16,
    "tf32": torch.float32,
    "fp32": torch.float32,
    "fp8e4m3": torch.float8_e4m3fn,
    "fp8e5m2": torch.float8_e5m2,
}
FLUSHES = ("read", "write")  # Timer's L2 flush: read a clean buffer (default), or zero one as do_bench does
FLUSH_MIN_BYTES = 256 << 20  # the flush buffer: at least this, and four times the L2
SPIN_CYCLES = 2_000_000  # ~1 ms of GPU spin at ~2 GHz ahead of a queued round
# ~0.1 ms of GPU spin ahead of each timed graph replay: the host's graph launch falls on it, not between the replay's
# start event and its first kernel (experiments/replay_bias.py)
REPLAY_SPIN_CYCLES = 200_000
FINAL_ROUNDS = 15  # rounds of the side-by-side final round (each candidate timed once per round)
# A config whose output differs from torch.matmul by more than this (max |diff| / max |ref|) is wrong.
WRONG_RESULT = {"fp16": 2e-2, "bf16": 3e-2, "tf32": 1e-2, "fp32": 1e-4, "fp8e4m3": 0.1, "fp8e5m2": 0.2}


def make_inputs(
    m: int, n: int, k: int, dtype: str, layout: str, device: torch.device, seed: int = 0, batch: int = 1
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random A [M, K] and B [K, N] in ``layout`` (values ~N(0,1)/sqrt(sqrt(K)) so outputs stay O(1))."""
    generator = torch.Generator(device=device).manual_seed(seed)
    scale = 1.0 / max(1.0, k) ** 0.25
    target = _TORCH_DTYPES[dtype]

    def draw(rows: int, cols: int, transposed: bool) -> torch.Tensor:
        shape = (batch, cols, rows) if transposed else (batch, rows, cols)
        x = torch.randn(shape, generator=generator, device=device, dtype=torch.float32) * scale
        x = x.to(target)
        x = x.transpose(-1, -2) if transposed else x
        return x[0] if batch == 1 else x

    return draw(m, k, layout[0] == "t"), draw(k, n, layout[1] == "t")


class Timer:
    """do_bench-style timing (L2 flushed before each run, median) and rotated back-to-back timing."""

    def __init__(
        self,
        rep_ms: float = 8.0,
        max_reps: int = 50,
        min_reps: int = 3,
        cutoff: float = 3.0,
        batch_us: float = 300.0,
        batches: int = 5,
        flush: str = "read",
        replay_spin_cycles: int = REPLAY_SPIN_CYCLES,
    ) -> None:
        if flush not in FLUSHES:
            raise ValueError(f"flush must be one of {', '.join(FLUSHES)} (got {flush!r})")
        self.flush_kind = flush
        self.l2 = l2_bytes()
        words = max(FLUSH_MIN_BYTES, 4 * self.l2) // 4
        self.cache = torch.ones(words, dtype=torch.float32, device="cuda")
        self.sink = torch.empty((), dtype=torch.float32, device="cuda")
        self.rep_ms = rep_ms
        self.max_reps = max_reps
        self.min_reps = min_reps
        self.cutoff = cutoff
        self.batch_us = batch_us
        self.batches = batches
        self.replay_spin_cycles = replay_spin_cycles  # 0: a replay starts its events on an idle GPU (host latency in)
        self.last_mode = ""  # how the last interleaved() timed: "graph" or "eager (...)"

    def flush(self) -> None:
        """Evict the L2 before a timed run: a read of the flush buffer (clean lines left behind; the previous run's
        dirty lines are written back now, not inside the next timing), or a zeroing of it (``flush="write"``)."""
        if self.flush_kind == "read":
            torch.sum(self.cache, dim=0, out=self.sink)
        else:
            self.cache.zero_()

    def _timed(self, fn: Callable[[], Any], count: int) -> list[float]:
        """``count`` L2-flushed runs, queued behind a GPU spin (as ``flushed_interleaved``'s rounds) so that a host
        stall while queueing falls on the spin, not between a start event and its kernel.  Unspun, a sweep beside
        other shards' compiles left four picks 4-12x slower than a sibling config, all on L2-flushed shapes
        (wide:300:682849 on 4x H100: 3904x14144x344's tma/128x256x64 s4 0.479 ms, s3 0.110); host stalls are the
        likely cause, not yet shown."""
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(count)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(count)]
        torch.cuda._sleep(SPIN_CYCLES)
        for i in range(count):
            self.flush()
            starts[i].record()
            fn()
            ends[i].record()
        torch.cuda.synchronize()
        return [s.elapsed_time(e) for s, e in zip(starts, ends, strict=True)]

    def _batched(self, fns: Sequence[Callable[[], Any]], calls: int, count: int) -> list[float]:
        """``count`` batches of ``calls`` back-to-back calls cycling through ``fns``: mean ms per call each."""
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(count)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(count)]
        rotation = len(fns)
        for i in range(count):
            starts[i].record()
            for j in range(calls):
                fns[j % rotation]()
            ends[i].record()
        torch.cuda.synchronize()
        return [s.elapsed_time(e) / calls for s, e in zip(starts, ends, strict=True)]

    def _calls(self, fns: Sequence[Callable[[], Any]], estimate: float) -> int:
        """Calls per batch: about ``batch_us`` of work, a whole number of rotations."""
        calls = max(len(fns), min(2000, int(self.batch_us / 1000.0 / max(estimate, 1e-4))))
        return -(-calls // len(fns)) * len(fns)

    def _graph(self, fns: Sequence[Callable[[], Any]], calls: int) -> Any:
        """A CUDA graph of ``calls`` calls cycling through ``fns`` (warmed on a side stream first)."""
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for f in fns:
                f()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for j in range(calls):
                fns[j % len(fns)]()
        return graph

    def _replayed(self, graph: Any, calls: int) -> float:
        """ms per call of one replay of ``graph`` (``calls`` calls), queued behind a short GPU spin: on an idle GPU the
        start event would fire at once and the host's graph launch (tens of us on H200 hosts) would be timed with the
        replay, a bias of that latency over ``calls`` per call: +1-4% on GEMMs, an empty kernel 1.5-3.6 us per call
        against 0.7 (H200 hosts, experiments/replay_bias.py)."""
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if self.replay_spin_cycles:
            torch.cuda._sleep(self.replay_spin_cycles)
        start.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / calls

    def interleaved(
        self, candidates: Sequence[Sequence[Callable[[], Any]]], keep: Sequence[int] = (), batches: int | None = None
    ) -> list[float]:
        """Median GPU ms per call of each candidate: back-to-back calls on rotated input copies, replayed
        from a CUDA graph (one per candidate), the replays interleaved round by round.

        A graph replay has no host launch cost in it: what is timed is the GPU's work per call, kernel
        boundaries included, as do_bench's events time it for larger inputs.  Timed eagerly instead, tiny
        GEMMs read the host (~10-20 us per call, drifting by tens of percent within a sweep) and the
        configs' real differences drown.  Round r times every candidate once, in an order that starts
        elsewhere each round and alternates direction, so GPU clock drift is shared.  A candidate
        ``cutoff`` x slower than the fastest on its first estimate keeps that estimate (it cannot be the
        best), except those in ``keep`` (the reference).  When a candidate cannot be captured (a plan
        that synchronizes, say) all are timed eagerly (``eager_batches``) and ``self.last_mode`` says so."""
        try:
            return self._interleaved_graphs(candidates, keep, batches)
        except Exception as error:  # capture refused: the host-inclusive fallback for every candidate alike
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            self.last_mode = f"eager (graph capture failed: {type(error).__name__}: {str(error)[:120]})"
            return self.eager_batches(candidates, keep, batches)

    def _interleaved_graphs(
        self, candidates: Sequence[Sequence[Callable[[], Any]]], keep: Sequence[int], batches: int | None
    ) -> list[float]:
        graphs: list[tuple[Any, int]] = []
        estimates: list[float] = []
        for fns in candidates:
            probe = self._graph(fns, len(fns))
            estimates.append(min(self._replayed(probe, len(fns)) for _ in range(2)))
            calls = self._calls(fns, estimates[-1])
            graphs.append((self._graph(fns, calls) if calls != len(fns) else probe, calls))
            del probe
        times = self._rounds(estimates, keep, batches, lambda i: [self._replayed(*graphs[i])])
        self.last_mode = "graph"
        return times

    def eager_batches(
        self, candidates: Sequence[Sequence[Callable[[], Any]]], keep: Sequence[int] = (), batches: int | None = None
    ) -> list[float]:
        """Median ms per call of each candidate launched from Python back to back (host cost included),
        batches interleaved as in ``interleaved``."""
        for fns in candidates:
            for f in fns:  # warm: every copy once
                f()
        estimates = [min(self._batched(fns, len(fns), 2)) for fns in candidates]
        calls = [self._calls(fns, estimate) for fns, estimate in zip(candidates, estimates, strict=True)]
        return self._rounds(estimates, keep, batches, lambda i: self._batched(candidates[i], calls[i], 1))

    def _rounds(
        self, estimates: list[float], keep: Sequence[int], batches: int | None, sample: Callable[[int], list[float]]
    ) -> list[float]:
        """Median of ``sample(i)`` per candidate over interleaved rounds; a candidate ``cutoff`` x slower than
        the fastest estimate (and not in ``keep``) is not timed and keeps its estimate."""
        fastest = min(estimates)
        live = [i for i, e in enumerate(estimates) if i in keep or e <= self.cutoff * fastest]
        samples: dict[int, list[float]] = {i: [] for i in live}
        for order in _round_orders(live, batches or self.batches):
            for i in order:
                samples[i] += sample(i)
        return [_median(samples[i]) if i in samples else e for i, e in enumerate(estimates)]

    def flushed_interleaved(self, fns: Sequence[Callable[[], Any]], budget_ms: float = 1500.0) -> list[float]:
        """Median ms of each ``fn`` over rounds that time every one once (L2 flushed before each run).

        The order starts elsewhere each round and alternates direction, so clock drift (a GEMM that heats
        the GPU lowers the power-limited clock for the next) falls on all alike; 5 to ``FINAL_ROUNDS``
        rounds within about ``budget_ms`` of runs.  A round is queued whole behind a short GPU spin and
        synchronized once, so the GPU never waits for the host between a start event and its kernel
        (synchronizing after every run let host stalls of ~0.1 ms into the times)."""
        estimates = [min(self._timed(fn, 2)) for fn in fns]  # also warms each
        rounds = int(min(FINAL_ROUNDS, max(5, budget_ms / max(sum(estimates), 1e-3))))
        samples: list[list[float]] = [[] for _ in fns]
        for order in _round_orders(list(range(len(fns))), rounds):
            events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in order]
            torch.cuda._sleep(SPIN_CYCLES)  # the host queues the round while the GPU spins
            for i, (start, end) in zip(order, events, strict=True):
                self.flush()
                start.record()
                fns[i]()
                end.record()
            torch.cuda.synchronize()
            for i, (start, end) in zip(order, events, strict=True):
                samples[i].append(start.elapsed_time(end))
        return [_median(v) for v in samples]

    def __call__(self, fn: Callable[[], Any] | Sequence[Callable[[], Any]], best_ms: float | None = None) -> float:
        """Median milliseconds of ``fn`` (already run once by the caller: compiled and warm).

        A sequence of callables (the same work on rotated input copies) selects back-to-back timing.
        """
        if not callable(fn):
            fns = list(fn)
            for f in fns:  # warm: every copy once
                f()
            first = self._batched(fns, len(fns), 2)
            estimate = min(first)
            if best_ms is not None and estimate > self.cutoff * best_ms:
                return estimate
            samples = sorted(self._batched(fns, self._calls(fns, estimate), self.batches))
            return samples[len(samples) // 2]
        first = self._timed(fn, self.min_reps)
        estimate = sorted(first)[len(first) // 2]
        if best_ms is not None and estimate > self.cutoff * best_ms:
            return estimate
        more = int(min(self.max_reps, max(0, self.rep_ms / max(estimate, 1e-3)))) - self.min_reps
        samples = first + (self._timed(fn, more) if more > 0 else [])
        samples.sort()
        return samples[len(samples) // 2]


def _round_orders(items: list[int], rounds: int) -> list[list[int]]:
    """The order of each round: starting elsewhere every round and reversed every other, so drift during
    the rounds falls on every item alike."""
    orders = []
    for r in range(rounds):
        shift = (r * len(items)) // rounds
        order = items[shift:] + items[:shift]
        orders.append(order[::-1] if r % 2 else order)
    return orders


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def l2_bytes(device: torch.device | None = None) -> int:
    """L2 size torch reports for the device (0 when unknown: then every shape is timed with flushes)."""
    props = torch.cuda.get_device_properties(device or torch.device("cuda"))
    return int(getattr(props, "L2_cache_size", 0) or 0)


@triton.jit
def _empty_kernel(x_ptr):  # noqa: ANN001, ARG001 (a launch that does nothing: the timing floor)
    pass


def timing_floors(timer: Timer) -> dict[str, float]:
    """What an empty Triton launch reads in each timing mode, for reading times as a model predicts them.

    The model predicts a kernel's cost within a stream of work (launched behind the previous kernel, as in a CUDA
    graph: ``launch_overhead_graph``).  Graph-replayed timing (inputs that fit in L2) measures that; a flushed run
    between two events also pays the events' own bracket: an empty launch reads 2.8-4.6 µs there against 0.7-1.4 µs
    per call in graph replays (H200 hosts, one GPU alone and four beside compiles; replays queued behind a spin:
    unspun they read the host's graph launch too, 3.6 and 5.8 µs in two GPU test runs, above the flushed 2.8-2.9).
    ``model.evaluate`` takes the difference off flushed times for its predicted / measured figures only
    (``in_stream_ms``).  Keys: ``flushed_ms``, ``graph_ms`` (per call), ``l2_bytes``.  Where graph capture is
    refused (the timer falls back to host-driven launches, which read the host's launch rate) the graph figure is
    unknown: it is taken as the flushed one, so that no bracket comes off, with a warning."""

    x = torch.zeros(1, device="cuda")

    def empty() -> None:
        _empty_kernel[(1,)](x)

    empty()
    flushed = timer.flushed_interleaved([empty])[0]
    graph = timer.interleaved([[empty]])[0]
    return floors(flushed, graph, timer.last_mode, timer.l2)


def floors(flushed_ms: float, graph_ms: float, graph_mode: str, l2_bytes: int) -> dict[str, float]:
    """``timing_floors``' record: a graph figure the timer did not take in graph replays (``graph_mode``, its
    ``last_mode``) is replaced by the flushed one, with a warning."""
    if graph_mode != "graph":
        warnings.warn(f"timing floors: {graph_mode}; flushed times are read with no bracket off", stacklevel=3)
        graph_ms = flushed_ms
    return {"flushed_ms": float(flushed_ms), "graph_ms": float(graph_ms), "l2_bytes": float(l2_bytes)}


def event_bracket_ms(floor: dict[str, float]) -> float:
    """What a flushed run's two events add to a kernel's time in a stream of work: the empty kernel's flushed figure
    over its graph-replayed one, never below 0."""
    return max(floor["flushed_ms"] - floor["graph_ms"], 0.0)


def flushed_timing(set_bytes: int, l2: int) -> bool:
    """Whether a shape whose inputs and output take ``set_bytes`` is timed in L2-flushed runs (else graph-replayed
    on rotated copies): ``rotation_count`` gives no rotation."""
    return rotation_count(set_bytes, l2) == 0


def rotation_count(set_bytes: int, l2: int, max_sets: int = 32) -> int:
    """How many input copies rotated timing cycles through (together over twice the L2); 0: flush instead."""
    if l2 <= 0 or set_bytes <= 0 or set_bytes > l2 // 2:
        return 0
    return max(2, min(max_sets, -(-2 * l2 // set_bytes) + 1))


def _max_rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """max |out - ref| / max |ref|, in row chunks (outputs can be several GB)."""
    rows = out.shape[-2]
    chunk = max(1, (1 << 26) // max(1, out.shape[-1]))
    worst = 0.0
    scale = 0.0
    for start in range(0, rows, chunk):
        o = out[..., start : start + chunk, :].float()
        r = ref[..., start : start + chunk, :].float()
        diff = (o - r).abs().max().item() if o.numel() else 0.0
        if math.isnan(diff):
            return math.nan
        worst = max(worst, diff)
        scale = max(scale, r.abs().max().item() if r.numel() else 0.0)
    return worst / scale if scale > 0 else worst


@dataclass
class BenchSettings:
    dtype: str = "bf16"
    layout: str = "nn"
    variants: tuple[str, ...] | None = None
    config_keys: tuple[str, ...] = ()
    rep_ms: float = 8.0
    max_reps: int = 50
    budget_s: float | None = None
    precompile: bool = True
    workers: int = 0
    rotate: bool = True  # rotated back-to-back timing for inputs that fit in L2 (else flushed runs only)
    extra: dict[str, Any] = field(default_factory=dict)


def configs_for(
    problem: Problem, limits: KernelLimits, settings: BenchSettings, profile: Any = None
) -> list[GemmConfig]:
    if settings.config_keys:
        return [GemmConfig.from_key(key) for key in settings.config_keys]
    return legal_configs(problem, limits, profile, settings.variants)


@dataclass
class _ShapeInputs:
    """One shape's inputs, reference and timed calls: what the sweep and the final round share."""

    problem: Problem
    a: torch.Tensor
    b: torch.Tensor
    ref: torch.Tensor
    out: torch.Tensor
    sets: Sequence[tuple[torch.Tensor, ...]]  # (a, b, torch's output, our output); set 0 is the checked one
    rotation: int  # input copies cycled through back to back; 0: L2-flushed runs instead
    torch_fns: list[Callable[[], Any]]
    precision: str | None


def _shape_inputs(m: int, n: int, k: int, dtype: str, layout: str, timer: Timer, rotate: bool) -> _ShapeInputs:
    device = torch.device("cuda")
    problem = Problem(m, n, k, dtype=dtype, layout=layout)
    a, b = make_inputs(m, n, k, dtype, layout, device, seed=m * 7 + n * 13 + k)
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    fp8 = dtype.startswith("fp8")
    ref = (a.float() @ b.float()).to(torch.float32) if fp8 else torch.matmul(a, b)
    out = torch.empty_like(ref, dtype=_TORCH_DTYPES[problem.output_dtype])
    set_bytes = a.numel() * a.element_size() + b.numel() * b.element_size() + out.numel() * out.element_size()
    rotation = rotation_count(set_bytes, timer.l2) if rotate else 0
    sets = [(a, b, ref, out)] + [(a.clone(), b.clone(), ref.clone(), out.clone()) for _ in range(max(0, rotation - 1))]
    one = torch.ones((), device=device, dtype=torch.float32)

    def torch_call(x: torch.Tensor, y: torch.Tensor, r: torch.Tensor) -> Callable[[], Any]:
        if fp8:
            # _scaled_mm wants a K-major B (w.t() of an nn.Linear weight [N, K]; copied once here, outside the timing)
            # and gives the output dtype of ours (bf16 by default)
            y_col = scaled_mm_operand(x, y).t().contiguous().t()
            out_torch = _TORCH_DTYPES[problem.output_dtype]
            return lambda: torch._scaled_mm(x, y_col, scale_a=one, scale_b=one, out_dtype=out_torch)
        return lambda: torch.matmul(x, y, out=r)

    torch_fns = [torch_call(x, y, r) for x, y, r, _ in sets]
    return _ShapeInputs(problem, a, b, ref, out, sets, rotation, torch_fns, "ieee" if dtype == "fp32" else None)


def scaled_mm_operand(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """B as the fp8 baseline ``torch._scaled_mm`` takes it beside A ``x``: as it is, except for e5m2 x e5m2, which
    torch refuses on CUDA (cuBLASLt has no kernel for it; it accepts e4m3 x e4m3, e4m3 x e5m2 and e5m2 x e4m3):
    there B is converted to e4m3 (clamped to its range), so that the baseline is the mixed e5m2 x e4m3 call, with
    the same bytes and the same fp8 tensor-core instructions as ours.  Its result is not ours: check results
    against the exact product of the dequantized inputs, never against this baseline."""
    if x.dtype == torch.float8_e5m2 and y.dtype == torch.float8_e5m2:
        limit = torch.finfo(torch.float8_e4m3fn).max
        return y.float().clamp(-limit, limit).to(torch.float8_e4m3fn)  # keeps y's strides
    return y


class _WrongResult(Exception):
    pass


def _checked_plan(inputs: _ShapeInputs, config: GemmConfig) -> tuple[Any, float, float]:
    """(plan, ms of one checked run, max relative error) after a warm-up run and a NaN-poisoned checked run.

    Warm-up first, always: a plan may launch a kernel (an aligned copy, a specialisation for M == 1, ...)
    that no earlier shape loaded, and that JIT load must not become its time.  Raises _WrongResult."""
    from theodolite.kernels.launch import plan_gemm

    plan = plan_gemm(inputs.a, inputs.b, config, out=inputs.out, precision=inputs.precision)
    plan.run()
    inputs.out.fill_(math.nan)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    plan.run()
    end.record()
    torch.cuda.synchronize()
    rel_error = _max_rel_error(inputs.out, inputs.ref)
    if not math.isfinite(rel_error) or rel_error > WRONG_RESULT[inputs.problem.dtype]:
        raise _WrongResult(f"wrong result: max_rel_error={rel_error}")
    return plan, start.elapsed_time(end), rel_error


def bench_shape(
    name: str,
    m: int,
    n: int,
    k: int,
    settings: BenchSettings,
    limits: KernelLimits,
    timer: Timer,
    profile: Any = None,
    log: Callable[[str], None] = print,
) -> Any:
    """One ShapeResult: torch.matmul and every config, side by side on the same random inputs."""
    from theodolite.kernels.launch import _FAST, _fast_key, gemm, plan_gemm

    from theodolite.results import ShapeResult

    dtype, layout = settings.dtype, settings.layout
    inputs = _shape_inputs(m, n, k, dtype, layout, timer, settings.rotate)
    problem, sets, rotation, torch_fns = inputs.problem, inputs.sets, inputs.rotation, inputs.torch_fns
    result = ShapeResult(name=name, M=m, N=n, K=k, dtype=dtype, layout=layout)
    torch_ok = True
    try:
        torch_fns[0]()
        torch.cuda.synchronize()
        if not rotation:
            result.torch_ms = timer(torch_fns[0])
    except Exception as error:  # torch may not support a dtype/layout here
        result.errors["torch"] = f"{type(error).__name__}: {str(error)[:200]}"
        torch_ok = False
    pending: dict[str, list[Callable[[], Any]]] = {}  # rotation mode: checked configs, timed together below
    best: float | None = None
    for config in configs_for(problem, limits, settings, profile):
        key = config.key
        try:
            plan, check_ms, rel_error = _checked_plan(inputs, config)
            result.max_rel_error[key] = rel_error
            if best is not None and check_ms > max(1.0, timer.cutoff * best):  # noqa: SIM108
                ms = check_ms  # far slower than the best already (one run): not worth timing further
            elif rotation:
                pending[key] = _our_calls(sets, config, inputs.precision, gemm, plan_gemm, _FAST, _fast_key)
                continue
            else:
                ms = timer(plan.run, best)
            result.configs[key] = ms
            best = ms if best is None else min(best, ms)
        except _WrongResult as wrong:
            result.configs[key] = None
            result.errors[key] = str(wrong)
        except Exception as failure:
            result.configs[key] = None
            result.errors[key] = f"{type(failure).__name__}: {str(failure)[:300]}"
            torch.cuda.synchronize()

    names = (["torch"] if torch_ok else []) + list(pending)
    if rotation and names:
        times = timer.interleaved([torch_fns if name == "torch" else pending[name] for name in names],
                                  keep=[0] if torch_ok else [])  # fmt: skip
        for name, ms in zip(names, times, strict=True):
            if name == "torch":
                result.torch_ms = ms
            else:
                result.configs[name] = ms
        if timer.last_mode != "graph":
            result.errors["@timing"] = timer.last_mode
    return result


def final_round(
    m: int, n: int, k: int, keys: Sequence[str], settings: BenchSettings, timer: Timer, budget_ms: float = 1500.0
) -> tuple[dict[str, float], dict[str, str]]:
    """torch.matmul (key ``results.TORCH_KEY``) and the configs ``keys`` timed again side by side.

    Every candidate is checked first; then round by round each is timed once (an L2-flushed run, or a
    batch of back-to-back calls on rotated copies for inputs that fit in L2), the order shifted and
    reversed every round, medians kept (flushed runs: within about ``budget_ms``).  Returns (times, errors)."""
    from theodolite.kernels.launch import _FAST, _fast_key, gemm, plan_gemm

    from theodolite.results import TORCH_KEY

    inputs = _shape_inputs(m, n, k, settings.dtype, settings.layout, timer, settings.rotate)
    names: list[str] = []
    candidates: list[list[Callable[[], Any]]] = []
    errors: dict[str, str] = {}
    try:
        inputs.torch_fns[0]()
        torch.cuda.synchronize()
        names.append(TORCH_KEY)
        candidates.append(inputs.torch_fns if inputs.rotation else inputs.torch_fns[:1])
    except Exception as error:
        errors[TORCH_KEY] = f"{type(error).__name__}: {str(error)[:200]}"
    for key in dict.fromkeys(keys):
        try:
            config = GemmConfig.from_key(key)
            plan, _, _ = _checked_plan(inputs, config)
            calls = (
                _our_calls(inputs.sets, config, inputs.precision, gemm, plan_gemm, _FAST, _fast_key)
                if inputs.rotation
                else [plan.run]
            )
            names.append(key)
            candidates.append(calls)
        except _WrongResult as wrong:
            errors[key] = str(wrong)
        except Exception as failure:
            errors[key] = f"{type(failure).__name__}: {str(failure)[:300]}"
            torch.cuda.synchronize()
    if not candidates:
        return {}, errors
    if inputs.rotation:
        times = timer.interleaved(candidates, keep=range(len(candidates)), batches=FINAL_ROUNDS)
        if timer.last_mode != "graph":
            errors["@timing"] = timer.last_mode
    else:
        times = timer.flushed_interleaved([calls[0] for calls in candidates], budget_ms)
    return dict(zip(names, times, strict=True)), errors


def _our_calls(
    sets: Sequence[tuple[torch.Tensor, ...]],
    config: GemmConfig,
    precision: str | None,
    gemm: Callable[..., Any],
    plan_gemm: Callable[..., Any],
    fast: dict[Any, Any],
    fast_key: Callable[..., Any],
) -> list[Callable[[], Any]]:
    """One call per input set: ``gemm()`` itself when its launch cache serves it (what a user pays per
    call), else a prepared plan (calls that gemm() cannot cache, e.g. with an aligned copy)."""
    x, y, _, o = sets[0]
    gemm(x, y, config, out=o, precision=precision)
    key = fast_key(x, y, config, o, 1.0, 0.0, None, None, None, None, None, None, precision)
    if key is not None and key in fast:
        return [
            (lambda x=x, y=y, o=o: gemm(x, y, config, out=o, precision=precision))  # type: ignore[misc]
            for x, y, _, o in sets
        ]
    return [plan_gemm(x, y, config, out=o, precision=precision).run for x, y, _, o in sets]


def _limits_and_profile(profile_path: str | None) -> tuple[KernelLimits, Any, str]:
    """Limits from the profile of this device; without one (or with another device's), the H100
    datasheet on an H100, else the limits torch reports for the device."""
    import warnings

    from theodolite.errors import ProfileError
    from theodolite.profile import load as load_profile
    from theodolite.profile.resolve import slug

    device_name = torch.cuda.get_device_name()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            profile = load_profile(profile_path)
        if profile_path or slug(profile.device_name) == slug(device_name):
            return KernelLimits.from_profile(profile), profile, str(profile.origin)
    except ProfileError:
        if profile_path:
            raise
    if "H100" in device_name:
        from theodolite.profile.datasheet import h100_sxm

        profile = h100_sxm()
        return KernelLimits.from_profile(profile), profile, "datasheet:h100_sxm"
    from theodolite.kernels.launch import device_limits

    return device_limits(torch.device("cuda")), None, "torch-device-properties"


def run_bench(
    shapes: Sequence[tuple[str, int, int, int]],
    settings: BenchSettings,
    output: str | os.PathLike[str] | None,
    profile_path: str | None = None,
    command: str = "",
    log: Callable[[str], None] = print,
    resume: str | os.PathLike[str] | None = None,
) -> Any:
    """Time a list of shapes, saving the results file after each shape (an interrupted sweep keeps its shapes)."""
    import triton
    from theodolite.kernels.build import precompile

    from theodolite.results import Results, save_results

    if not torch.cuda.is_available():
        from theodolite.errors import NoDeviceError

        raise NoDeviceError("bench needs a GPU (torch.cuda.is_available() is False)")
    limits, profile, origin = _limits_and_profile(profile_path)
    started = time.time()
    timer_l2 = l2_bytes()
    results = Results(
        device=torch.cuda.get_device_name(),
        command=command,
        created_utc=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        profile_fingerprint=getattr(profile, "fingerprint", ""),
        profile_path=origin,
        torch_version=torch.__version__,
        triton_version=triton.__version__,
        settings={
            "dtype": settings.dtype,
            "layout": settings.layout,
            "variants": list(settings.variants or ()),
            "rep_ms": settings.rep_ms,
            "max_reps": settings.max_reps,
            "timing": (
                "inputs over L2/2: median of CUDA-event runs after an L2 flush by a read; smaller: median of"
                " batches of back-to-back calls rotating input copies (> 2x L2, at most 32); early stop at 3x the best"
                if settings.rotate
                else "median of CUDA-event runs after an L2 flush by a read, early stop at 3x the best"
            ),
            "l2_bytes": timer_l2,
            **settings.extra,
        },
    )
    if settings.precompile:
        from theodolite.kernels.build import specialization

        smallest: dict[tuple[str, tuple[bool, ...]], tuple[float, GemmConfig, Problem]] = {}
        for _, m, n, k in shapes:
            problem = Problem(m, n, k, dtype=settings.dtype, layout=settings.layout)
            if problem.m * problem.n * problem.k == 0:
                continue
            spec = specialization(problem)
            for config in configs_for(problem, limits, settings, profile):
                known = smallest.get((config.key, spec))
                if known is None or problem.flops < known[0]:
                    smallest[(config.key, spec)] = (problem.flops, config, problem)
        t0 = time.time()
        workers = settings.workers or max(1, min(16, (os.cpu_count() or 2) - 1))
        errors = precompile([(config, problem) for _, config, problem in smallest.values()], workers=workers)
        log(
            f"precompiled {len(smallest)} (config, specialization) pairs in {time.time() - t0:.1f}s"
            f" with {workers} processes"
        )
        for error in errors[:20]:
            log(f"  precompile: {error}")
        results.settings["precompile_s"] = round(time.time() - t0, 1)
    timer = Timer(settings.rep_ms, settings.max_reps)
    done: set[tuple[str, int, int, int]] = set()
    if resume is not None and Path(resume).is_file():
        from theodolite.results import load_results

        previous = load_results(resume)
        results.shapes.extend(s for s in previous.shapes if s.dtype == settings.dtype and s.layout == settings.layout)
        done = {(s.name, s.M, s.N, s.K) for s in results.shapes}
        log(f"resuming: {len(done)} shapes already in {resume}")
    for index, (name, m, n, k) in enumerate(shapes):
        if (name, m, n, k) in done:
            continue
        if settings.budget_s is not None and time.time() - started > settings.budget_s:
            log(f"budget of {settings.budget_s:.0f}s spent: stopping before shape {index + 1}/{len(shapes)}")
            results.settings["incomplete"] = True
            break
        t0 = time.time()
        shape = bench_shape(name, m, n, k, settings, limits, timer, profile, log)
        results.shapes.append(shape)
        results.settings["wall_s"] = round(time.time() - started, 1)
        if output is not None:
            save_results(results, output)
        log(_progress_line(index, len(shapes), shape, time.time() - t0))
    return results


def _progress_line(index: int, total: int, shape: Any, seconds: float) -> str:
    best = shape.best()
    torch_tf = shape.tflops(shape.torch_ms)
    if best is None:
        return f"[{index + 1}/{total}] {shape.name} {shape.M}x{shape.N}x{shape.K}: no config ran ({seconds:.1f}s)"
    key, ms = best
    tf = shape.tflops(ms)
    ratio = shape.torch_ms / ms if shape.torch_ms else float("nan")
    torch_text = f"{torch_tf:.0f}" if torch_tf else "-"
    return (
        f"[{index + 1}/{total}] {shape.name} {shape.M}x{shape.N}x{shape.K}: best {key} {tf:.0f} TFLOP/s, "
        f"torch {torch_text}, x{ratio:.2f} ({len(shape.configs)} configs, {seconds:.1f}s)"
    )


def summary(results: Any) -> dict[str, float]:
    """Geomean and minimum of torch_ms / best_ms (>1: our best beats torch.matmul) over shapes with both."""
    ratios = []
    for shape in results.shapes:
        best = shape.best()
        if best is not None and shape.torch_ms and shape.flops > 0:
            ratios.append(shape.torch_ms / best[1])
    if not ratios:
        return {"shapes": 0}
    geomean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    return {"shapes": len(ratios), "geomean": geomean, "min": min(ratios), "below_0.85": sum(r < 0.85 for r in ratios)}


def print_table(results: Any, stream: Any = None) -> None:
    """A table of shape, best config, TFLOP/s and torch.matmul TFLOP/s (rich when available)."""
    rows = []
    for shape in results.shapes:
        best = shape.best()
        key, ms = best if best is not None else ("-", None)
        tf = shape.tflops(ms)
        ttf = shape.tflops(shape.torch_ms)
        ratio = f"{shape.torch_ms / ms:.2f}" if ms and shape.torch_ms else "-"
        rows.append(
            (
                shape.name,
                f"{shape.M}x{shape.N}x{shape.K}",
                key,
                f"{tf:.1f}" if tf else "-",
                f"{ttf:.1f}" if ttf else "-",
                ratio,
            )
        )
    stats = summary(results)
    try:
        from rich.console import Console
        from rich.table import Table

        table = Table(title=f"{results.device} {results.settings.get('dtype', '')}")
        for column in ("shape", "MxNxK", "best config", "TFLOP/s", "torch TFLOP/s", "torch/best"):
            table.add_column(column)
        for row in rows:
            table.add_row(*row)
        console = Console(file=stream or sys.stdout, width=160)
        console.print(table)
    except ImportError:
        for row in rows:
            print(" | ".join(row), file=stream or sys.stdout)
    print(f"summary: {stats}", file=stream or sys.stdout)
