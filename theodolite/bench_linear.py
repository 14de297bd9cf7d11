"""A client's benchmark: a Llama-3-8B-sized decoder's projections through ``F.linear`` and through theodolite.

Per layer four GEMMs of bf16 weights stored ``[out, in]`` as ``nn.Linear`` keeps them: qkv 4096->6144,
o 4096->4096, gate_up 4096->28672, down 14336->4096.  For each M (tokens), measured side by side in one process:

- eager: one pass (every layer's four projections from fixed inputs), wall time with the host included (one
  synchronize per pass), ``F.linear(x, W)`` against ``theodolite.ops.linear(x, W)``, alternating, median of repeats;
- CUDA graph: the same pass captured once per side, replay time;
- torch.compile (default mode, fullgraph, dynamic M) of a decoder-ish stack (projections with residual adds and a
  SwiGLU between gate_up and down) unpatched against ``theodolite.patch``-ed;
- host: per-call host time of each entry point at a small M with the GPU kept busy (so no call waits for it), a
  cProfile of theodolite's call path and a torch.profiler summary of one eager pass (CPU ops and GPU kernels);
- compiled host: host us per projection inside an inductor-compiled graph (a chain of 8 projections against a
  chain of 1, the GPU kept busy), torch's and theodolite's: what a compiled decode step pays per GEMM;
- kernels: per projection and M, GPU us per call of torch and theodolite, and at M in 32..512 the model's next
  ranked configs (``theodolite.bench_kernels``): which projection loses, and whether the pick or the bundle does.

Ratios are torch / theodolite (above 1: theodolite faster).  Tokens/s count the projections' GEMMs only.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from theodolite import ops


def projections(hidden: int = 4096, ffn: int = 14336, kv: int = 1024) -> tuple[tuple[str, int, int], ...]:
    """(name, in_features, out_features) of one layer's projections (Llama-3-8B: 8 KV heads of 128, hence kv)."""
    return (
        ("qkv", hidden, hidden + 2 * kv),
        ("o", hidden, hidden),
        ("gate_up", hidden, 2 * ffn),
        ("down", ffn, hidden),
    )


PROJECTIONS = projections()
MS: tuple[int, ...] = (1, 8, 32, 128, 512, 2048, 8192)
DECODE_MS = (1, 8, 32)
PREFILL_MS = (2048, 8192)


@dataclass
class Settings:
    layers: int = 32
    ms: Sequence[int] = MS
    repeats: int = 7
    compile_layers: int = 4
    compile: bool = True
    host_m: int = 8
    host_calls: int = 200
    trace: str | None = None  # a chrome trace of one eager pass at host_m, both sides
    hidden: int = 4096
    ffn: int = 14336
    kv: int = 1024
    kernels: bool = True  # per-projection kernel times (GPU only)
    kernel_layers: int = 8  # distinct weights per projection timing (more than L2 holds, as in the pass)
    candidate_top: int = 4  # the pick and the model's next configs timed at bench_kernels.CANDIDATE_MS
    kernel_budget_s: float = 120.0  # candidate timing stops after this (first compiles of new configs are slow)

    @property
    def projections(self) -> tuple[tuple[str, int, int], ...]:
        return projections(self.hidden, self.ffn, self.kv)


@dataclass
class Row:
    m: int
    eager_torch_ms: float
    eager_theodolite_ms: float
    graph_torch_ms: float
    graph_theodolite_ms: float
    compile_torch_ms: float | None = None
    compile_theodolite_ms: float | None = None
    max_rel_err: float = 0.0
    ratios: dict[str, float | None] = field(default_factory=dict)


def _weights(settings: Settings, device: torch.device, dtype: torch.dtype) -> list[list[Tensor]]:
    """Random weights per layer, [out, in], scaled so outputs keep unit variance."""
    g = torch.Generator(device=device).manual_seed(0)
    return [
        [
            torch.randn(out_f, in_f, device=device, dtype=dtype, generator=g) * in_f**-0.5
            for _, in_f, out_f in settings.projections
        ]
        for _ in range(settings.layers)
    ]


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _torch_linear(x: Tensor, w: Tensor) -> Tensor:
    return F.linear(x, w)


def _pass(fn: Callable[[Tensor, Tensor], Tensor], weights: list[list[Tensor]], x: Tensor, h: Tensor) -> Tensor:
    """One pass: every layer's four projections (qkv, o, gate_up from x; down from h)."""
    y = x
    for wq, wo, wgu, wd in weights:
        fn(x, wq)
        fn(x, wo)
        fn(x, wgu)
        y = fn(h, wd)
    return y


def _wall_ms(run: Callable[[], Any]) -> float:
    _sync()
    t0 = time.perf_counter()
    run()
    _sync()
    return (time.perf_counter() - t0) * 1e3


def _side_by_side(runs: Mapping[str, Callable[[], Any]], repeats: int) -> dict[str, float]:
    """Median wall ms of each run, alternating between them each repeat (drift hits both sides alike)."""
    samples: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            samples[name].append(_wall_ms(run))
    return {name: statistics.median(values) for name, values in samples.items()}


def _graph(run: Callable[[], Any]) -> torch.cuda.CUDAGraph:
    """Capture ``run`` after a warm-up on a side stream (first calls compile kernels and fill caches)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        run()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run()
    return graph


class _Stack(torch.nn.Module):
    """Decoder-ish layers of the benchmark's projections: x += o(qkv(x)[:, :H]); x += down(silu(g) * u)."""

    def __init__(self, weights: list[list[Tensor]], settings: Settings) -> None:
        super().__init__()
        self.hidden = settings.hidden
        self.layers = torch.nn.ModuleList()
        for layer in weights:
            mods = torch.nn.ModuleDict()
            for (name, in_f, out_f), w in zip(settings.projections, layer, strict=True):
                lin = torch.nn.Linear(in_f, out_f, bias=False, device="meta")
                lin.weight = torch.nn.Parameter(w, requires_grad=False)
                mods[name] = lin
            self.layers.append(mods)

    def forward(self, x: Tensor) -> Tensor:
        for mods in self.layers:
            assert isinstance(mods, torch.nn.ModuleDict)
            x = x + mods["o"](mods["qkv"](x)[:, : self.hidden])
            gate, up = mods["gate_up"](x).chunk(2, dim=-1)
            x = x + mods["down"](F.silu(gate) * up)
        return x


def _rel_err(got: Tensor, want: Tensor) -> float:
    scale = want.float().abs().max().item() or 1.0
    return float((got.float() - want.float()).abs().max().item() / scale)


def _graph_count() -> int:
    """Graphs dynamo has compiled in this process (its stats counter)."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


def _compile_rows(settings: Settings, weights: list[list[Tensor]], device: torch.device) -> dict[str, Any]:
    """torch.compile(fullgraph, dynamic) of the stack, unpatched and patched: ms per M, compile seconds, graphs
    compiled for the two largest M (1 each: no graph break, no recompile for another M; torch specializes M=1, so
    ``graphs_after_every_m`` counts one more per side where M=1 is timed), error against the compiled torch stack."""
    from theodolite.nn import patch

    layers = weights[: settings.compile_layers]
    plain, patched = _Stack(layers, settings), _Stack(layers, settings)
    patch(patched)
    backend = "inductor" if device.type == "cuda" else "aot_eager"  # the CPU smoke test has no C++ toolchain need
    out: dict[str, Any] = {"layers": len(layers), "backend": backend, "ms": {}, "compile_s": {}, "graphs": {},
                           "max_rel_err": {}}  # fmt: skip
    torch._dynamo.reset()
    compiled = {
        "torch": torch.compile(plain, fullgraph=True, dynamic=True, backend=backend),
        "theodolite": torch.compile(patched, fullgraph=True, dynamic=True, backend=backend),
    }
    dtype = weights[0][0].dtype
    for name, model in compiled.items():
        before = _graph_count()
        t0 = time.perf_counter()
        for m in sorted(settings.ms)[-2:][::-1]:  # the largest M compiles; the next must reuse its graph
            model(torch.randn(m, settings.hidden, device=device, dtype=dtype))
        _sync()
        out["compile_s"][name] = time.perf_counter() - t0
        out["graphs"][name] = _graph_count() - before
    for m in settings.ms:
        x = torch.randn(m, settings.hidden, device=device, dtype=dtype)
        out["max_rel_err"][m] = _rel_err(compiled["theodolite"](x), compiled["torch"](x))
        runs = {name: (lambda model=model, x=x: model(x)) for name, model in compiled.items()}
        out["ms"][m] = _side_by_side(runs, settings.repeats)
    out["graphs_after_every_m"] = _graph_count()
    return out


def _busy() -> None:
    """Keep the GPU busy ~0.1 s so the host's calls that follow never wait for it."""
    if torch.cuda.is_available():
        torch.cuda._sleep(200_000_000)


def _host_loop(fn: Callable[[], Any], calls: int) -> float:
    _busy()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    dt = (time.perf_counter() - t0) / calls * 1e6
    _sync()
    return dt


def host_per_call(settings: Settings, device: torch.device, dtype: torch.dtype) -> dict[str, float]:
    """Host microseconds per call of each entry point (best of three loops), the GPU kept busy so no call waits for
    it: what a host-bound eager model pays per projection."""
    from theodolite import matmul
    from theodolite.nn import Linear

    hidden = settings.hidden
    x = torch.randn(settings.host_m, hidden, device=device, dtype=dtype)
    w = torch.randn(hidden, hidden, device=device, dtype=dtype) * hidden**-0.5
    lin = Linear(hidden, hidden, bias=False, device=device, dtype=dtype)
    lin_torch = torch.nn.Linear(hidden, hidden, bias=False, device=device, dtype=dtype)
    entries: dict[str, Callable[[], Any]] = {
        "F.linear": lambda: F.linear(x, w),
        "theodolite.ops.linear": lambda: ops.linear(x, w),
        "torch.ops.theodolite.linear": lambda: ops.linear_op(x, w, None),
        "theodolite.matmul(x, W.t())": lambda: matmul(x, w.t()),
        "nn.Linear": lambda: lin_torch(x),
        "theodolite.nn.Linear": lambda: lin(x),
    }
    result: dict[str, float] = {}
    with torch.no_grad():
        for fn in entries.values():
            fn()  # compile and cache outside the timing
        _sync()
        for _ in range(3):
            for name, fn in entries.items():
                result[name] = min(result.get(name, float("inf")), _host_loop(fn, settings.host_calls))
    # autograd recording (a weight that requires grad): the custom op's autograd wrapper against torch's
    wg = w.detach().requires_grad_()
    grad_entries = {"F.linear, grad": lambda: F.linear(x, wg), "theodolite.ops.linear, grad": lambda: ops.linear(x, wg)}
    for fn in grad_entries.values():
        fn()
    for _ in range(3):
        for name, fn in grad_entries.items():
            result[name] = min(result.get(name, float("inf")), _host_loop(fn, settings.host_calls))
    return result


def host_profile(settings: Settings, device: torch.device, dtype: torch.dtype, top: int = 15) -> list[dict[str, Any]]:
    """cProfile of theodolite.ops.linear calls (GPU kept busy): the top functions by own time, per call."""
    calls = settings.host_calls
    x = torch.randn(settings.host_m, settings.hidden, device=device, dtype=dtype)
    w = torch.randn(settings.hidden, settings.hidden, device=device, dtype=dtype)
    profiler = cProfile.Profile()
    with torch.no_grad():
        ops.linear(x, w)
        _sync()
        _busy()
        profiler.enable()
        for _ in range(calls):
            ops.linear(x, w)
        profiler.disable()
        _sync()
    stats = pstats.Stats(profiler, stream=io.StringIO())
    rows = []
    for (filename, line, function), (_, ncalls, tottime, cumtime, _) in stats.stats.items():  # type: ignore[attr-defined]
        rows.append({"function": f"{filename.rsplit('/', 2)[-1]}:{line}({function})", "calls": ncalls,
                     "own_us_per_call": tottime / calls * 1e6, "cum_us_per_call": cumtime / calls * 1e6})  # fmt: skip
    rows.sort(key=lambda r: -r["own_us_per_call"])
    return rows[:top]


def trace_pass(settings: Settings, weights: list[list[Tensor]], device: torch.device) -> dict[str, Any]:
    """torch.profiler over one eager pass per side at M=host_m: GPU kernel time and count, the launch API's CPU time,
    the pass's wall time as the profiler saw it (a chrome trace per side to ``settings.trace`` when given)."""
    from torch.profiler import ProfilerActivity, profile

    dtype = weights[0][0].dtype
    x = torch.randn(settings.host_m, settings.hidden, device=device, dtype=dtype)
    h = torch.randn(settings.host_m, settings.ffn, device=device, dtype=dtype)
    summary: dict[str, Any] = {"m": settings.host_m}
    with torch.no_grad():
        for name, fn in (("torch", _torch_linear), ("theodolite", ops.linear)):
            _pass(fn, weights, x, h)
            _sync()
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                t0 = time.perf_counter()
                _pass(fn, weights, x, h)
                _sync()
                wall = time.perf_counter() - t0
            if settings.trace:
                prof.export_chrome_trace(settings.trace.replace(".json", f"-{name}.json"))
            events = prof.key_averages()
            kernels = [e for e in events if e.device_type == torch.autograd.DeviceType.CUDA]
            launches = [e for e in events if "LaunchKernel" in e.key or "cuLaunch" in e.key]
            summary[name] = {
                "wall_us_profiled": wall * 1e6,
                "gpu_kernel_us": sum(e.self_device_time_total for e in kernels),
                "kernel_launches": sum(e.count for e in kernels),
                "launch_api_calls": sum(e.count for e in launches),
                "launch_api_cpu_us": sum(e.self_cpu_time_total for e in launches),
                "kernels": sorted(
                    ({"name": e.key[:80], "count": e.count, "us": e.self_device_time_total} for e in kernels),
                    key=lambda k: -k["us"],
                )[:8],
            }
    return summary


def compiled_host_us(settings: Settings, device: torch.device, dtype: torch.dtype, chain: int = 8) -> dict[str, Any]:
    """Host microseconds per projection inside an inductor-compiled graph: a compiled chain of ``chain`` square
    projections against a chain of one (the graph call's own cost cancels), at M=host_m, the GPU kept busy so no
    call waits for it (calls per loop kept under the launch queue's depth).  Torch's (``extern_kernels.mm``)
    against theodolite's (the ``theodolite::linear`` operator), and the graph call's own cost."""
    from theodolite.nn import patch

    hidden = settings.hidden
    weights = [torch.randn(hidden, hidden, device=device, dtype=dtype) * hidden**-0.5 for _ in range(chain)]
    x = torch.randn(settings.host_m, hidden, device=device, dtype=dtype)
    calls = max(1, 480 // chain)
    out: dict[str, Any] = {"m": settings.host_m, "chain": chain, "per_op_us": {}, "graph_call_us": {}}
    for side in ("torch", "theodolite"):
        loops: dict[int, float] = {}
        for n in (1, chain):
            model = torch.nn.Sequential(*(torch.nn.Linear(hidden, hidden, bias=False, device="meta")
                                          for _ in range(n)))  # fmt: skip
            for lin, w in zip(model, weights, strict=False):
                lin.weight = torch.nn.Parameter(w, requires_grad=False)
            if side == "theodolite":
                patch(model)
            compiled = torch.compile(model, fullgraph=True, dynamic=False)
            with torch.no_grad():
                for _ in range(3):
                    compiled(x)  # compile, then warm
                _sync()
                loops[n] = min(_host_loop(partial(compiled, x), calls) for _ in range(3))
        out["per_op_us"][side] = (loops[chain] - loops[1]) / (chain - 1)
        out["graph_call_us"][side] = loops[1] - out["per_op_us"][side]
    return out


def run(settings: Settings, progress: Callable[[str], None] = print) -> dict[str, Any]:
    """Every measurement of the module docstring as one JSON-ready dictionary.  Without a GPU (the CPU smoke test,
    TRITON_INTERPRET=1, fp32) only eager and compile run: CUDA graphs, the host timings and the trace need one."""
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    dtype = torch.bfloat16 if cuda else torch.float32
    torch.manual_seed(0)
    weights = _weights(settings, device, dtype)
    rows: list[Row] = []
    phase_s: dict[str, float] = {}
    t0 = time.perf_counter()
    with torch.no_grad():
        for m in settings.ms:
            x = torch.randn(m, settings.hidden, device=device, dtype=dtype)
            h = torch.randn(m, settings.ffn, device=device, dtype=dtype)
            err = max(
                _rel_err(ops.linear(inp, w), F.linear(inp, w)) for inp, w in zip((x, x, x, h), weights[0], strict=True)
            )
            eager = {
                "torch": lambda x=x, h=h: _pass(_torch_linear, weights, x, h),
                "theodolite": lambda x=x, h=h: _pass(ops.linear, weights, x, h),
            }
            for fn in eager.values():
                fn()  # warm: Triton compiles, caches fill
            e = _side_by_side(eager, settings.repeats)
            g = {"torch": 0.0, "theodolite": 0.0}
            if cuda:
                graphs = {name: _graph(fn) for name, fn in eager.items()}
                g = _side_by_side({name: gr.replay for name, gr in graphs.items()}, settings.repeats)
                del graphs
            rows.append(Row(m, e["torch"], e["theodolite"], g["torch"], g["theodolite"], max_rel_err=err))
            progress(f"M={m}: eager {e['torch']:.3f} / {e['theodolite']:.3f} ms, graph {g['torch']:.3f} / "
                     f"{g['theodolite']:.3f} ms, max rel err {err:.2e}")  # fmt: skip
    phase_s["eager_and_graph"] = time.perf_counter() - t0
    compiled: dict[str, Any] | None = None
    errors: dict[str, str] = {}
    if settings.compile:
        t0 = time.perf_counter()
        try:
            compiled = _compile_rows(settings, weights, device)
        except Exception as error:  # noqa: BLE001 - a graph break (fullgraph) or compile failure is a result too
            errors["compile"] = f"{type(error).__name__}: {error}"[:2000]
            progress(f"torch.compile failed: {errors['compile'][:300]}")
        phase_s["compile"] = time.perf_counter() - t0
    if compiled is not None:
        for row in rows:
            times = compiled["ms"].get(row.m)
            if times:
                row.compile_torch_ms, row.compile_theodolite_ms = times["torch"], times["theodolite"]
        progress(f"torch.compile: graphs {compiled['graphs']}, compile s {compiled['compile_s']}")
    for row in rows:
        row.ratios = {
            "eager": row.eager_torch_ms / row.eager_theodolite_ms,
            "graph": row.graph_torch_ms / row.graph_theodolite_ms if row.graph_theodolite_ms else None,
            "compile": row.compile_torch_ms / row.compile_theodolite_ms
            if row.compile_torch_ms and row.compile_theodolite_ms
            else None,
        }
    result: dict[str, Any] = {
        "format": "theodolite-bench-linear",
        "device": torch.cuda.get_device_name() if cuda else "cpu (Triton interpreter)",
        "torch": torch.__version__,
        "triton": _triton_version(),
        "dtype": str(dtype).removeprefix("torch."),
        "layers": settings.layers,
        "gemms_per_pass": 4 * settings.layers,
        "projections": [list(p) for p in settings.projections],
        "repeats": settings.repeats,
        "rows": [row.__dict__ for row in rows],
        "tokens_per_s": _tokens(rows),
        "compile": compiled,
    }
    if cuda:
        parts: dict[str, Callable[[], Any]] = {
            "host_us_per_call": lambda: {"m": settings.host_m, **host_per_call(settings, device, dtype)},
            "compiled_host_us": lambda: compiled_host_us(settings, device, dtype),
            "host_profile_theodolite": lambda: host_profile(settings, device, dtype),
            "trace": lambda: trace_pass(settings, weights, device),
        }
        if settings.kernels:
            parts["kernels"] = lambda: _kernel_rows(settings, weights, progress)
        for key, part in parts.items():
            t0 = time.perf_counter()
            try:
                result[key] = part()
            except Exception as error:  # noqa: BLE001 - keep the timings already taken
                errors[key] = f"{type(error).__name__}: {error}"[:2000]
            phase_s[key] = time.perf_counter() - t0
    result["errors"] = errors
    result["phase_s"] = phase_s
    return result


def _kernel_rows(settings: Settings, weights: list[list[Tensor]], progress: Callable[[str], None]) -> list[Any]:
    from theodolite import bench_kernels

    with torch.no_grad():
        return bench_kernels.projection_times(
            weights[: settings.kernel_layers], settings.projections, settings.ms, top=settings.candidate_top,
            budget_s=settings.kernel_budget_s, progress=progress,
        )  # fmt: skip


def _triton_version() -> str:
    import triton

    return str(triton.__version__)


def _tokens(rows: list[Row]) -> dict[str, Any]:
    """Tokens per second of one pass (the layers' projections only), prefill and decode M, per mode and side."""
    out: dict[str, Any] = {}
    for row in rows:
        phase = "prefill" if row.m in PREFILL_MS else "decode" if row.m in DECODE_MS else None
        if phase is None:
            continue
        entry = {}
        for mode in ("eager", "graph", "compile"):
            for side in ("torch", "theodolite"):
                ms = getattr(row, f"{mode}_{side}_ms")
                if ms:
                    entry[f"{mode}_{side}"] = row.m / (ms / 1e3)
        out.setdefault(phase, {})[row.m] = entry
    return out


def table(result: dict[str, Any]) -> str:
    """The issue's table: torch / theodolite per M (above 1: theodolite faster), then tokens/s and host us/call."""
    rows = result["rows"]
    head = f"{'M':>18} | " + " | ".join(f"{r['m']:>6}" for r in rows)

    def line(label: str, key: str) -> str:
        cells = [r["ratios"].get(key) for r in rows]
        return f"{label:>18} | " + " | ".join(f"{c:>5.2f}x" if c else f"{'-':>6}" for c in cells)

    lines = [
        f"{result['device']}: {result['gemms_per_pass']} GEMMs per pass ({result['layers']} layers), "
        "torch / theodolite (above 1: theodolite faster)",
        head,
        line("eager", "eager"),
        line("CUDA graph", "graph"),
        line("torch.compile", "compile"),
        "",
    ]
    for phase, per_m in result["tokens_per_s"].items():
        for m, entry in per_m.items():
            cells = ", ".join(f"{k} {v:,.0f}" for k, v in entry.items())
            lines.append(f"{phase} M={m} tokens/s: {cells}")
    lines.extend(f"error in {key}: {text[:300]}" for key, text in result.get("errors", {}).items())
    host = result.get("host_us_per_call")
    if host:
        lines.append(f"host us per call at M={host['m']}:")
        lines.extend(f"  {k:<30} {v:6.1f}" for k, v in host.items() if k != "m")
    comp = result.get("compiled_host_us")
    if comp:
        per_op = ", ".join(f"{k} {v:.1f}" for k, v in comp["per_op_us"].items())
        lines.append(f"host us per projection inside a compiled graph at M={comp['m']}: {per_op}")
    if result.get("kernels"):
        from theodolite import bench_kernels

        lines.append(bench_kernels.table(result["kernels"]))
    if result.get("phase_s"):
        lines.append("seconds: " + ", ".join(f"{k} {v:.0f}" for k, v in result["phase_s"].items()))
    return "\n".join(lines)


__all__ = ["MS", "PROJECTIONS", "Settings", "host_per_call", "projections", "run", "table"]
