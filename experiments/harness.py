"""What the device experiments share (``small_copy.py``, ``short_k.py``, ``decode_tiles.py``, ``zero_fill.py``,
``deep_splitk.py``, ``splitk_reduce.py``, ``streamk_rounds.py``, ``flush_writeback.py``, ``scalar_offsets.py``,
``scalar_residency.py``, ``tma_store.py``, ``coop_splitk.py``, ``out_vec.py``, ``composite_tiles.py``,
``scalar_coalesce.py``, ``copy_kernel.py``, ``near_bar.py``, ``tma_streamk.py``, ``tma_balanced.py``,
``tile_scan.py``, ``large_grid.py``, ``mixed_tiles.py``, ``bar_spread.py``, ``hot_rows.py``, ``replay_bias.py``, and
the ``bench --config`` runs of ``tma_twins.py``, ``decode_depth.py``, ``pipeline_fill.py``,
``splitk_short_slices.py``, ``shared_panels.py``, ``short_k_outputs.py``, ``tiny_tiles.py``, ``wave_steps.py``,
``fp8_composite_steps.py`` and their ``--summary`` modes (``benched_shapes``, ``print_k_steps``); the within-shape
residuals of committed sweeps for their ``--sweeps`` modes): the GPU's short name, kernels copied with an
``epilogue`` switch flipped, compiling in worker processes, the copy rule's thresholds changed for a block, a sweep's
fastest configs, an input set rotated through L2 with torch.matmul's calls and a reference, checked launches,
side-by-side timing (as ``validate`` times a shape too), the results file, and merging an experiment's times into a
committed results file."""

import contextlib
import functools
import json
import math
import multiprocessing
import os
import subprocess
import sys
import tempfile
import types
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import theodolite.kernels.config as config_module
import torch
import triton
from theodolite.kernels.benchmark import Timer, _shape_inputs, make_inputs, rotation_count
from theodolite.kernels.config import ConfigError, GemmConfig, Problem
from theodolite.kernels.launch import plan_gemm

T = TypeVar("T")
R = TypeVar("R")


def copy_jit(jitted: Any, overrides: dict[str, Any]) -> Any:
    """A JIT function with the same code as ``jitted`` and its module's globals changed by ``overrides`` (its own
    caches; Triton's cache key holds the changed global constexprs)."""
    fn = jitted.fn
    scope = dict(fn.__globals__)
    scope.update(overrides)
    copy = types.FunctionType(fn.__code__, scope, fn.__name__, fn.__defaults__, fn.__closure__)
    copy.__module__, copy.__qualname__, copy.__doc__ = fn.__module__, fn.__qualname__, fn.__doc__
    copy.__annotations__, copy.__kwdefaults__ = dict(fn.__annotations__), fn.__kwdefaults__  # constexpr parameters
    return triton.jit(copy, do_not_specialize=list(jitted.do_not_specialize or []))


_SWITCHED: dict[tuple[str, bool], dict[Any, Any]] = {}


def switched_plans(sets: list[tuple[Any, Any, Any]], key: str, on: bool, *, switch: str) -> list[Any]:
    """Each (A, B, out) set's plan of config ``key`` whose persistent, Stream-K and split-K kernels run with the
    ``kernels.epilogue`` switch ``switch`` (a module constexpr such as ``SCALAR_OFFSETS``) set to ``on``: copies of the
    kernels, so both ways run side by side in one process."""
    import triton.language as tl
    from theodolite.kernels import epilogue, persistent, splitk, streamk

    if (switch, on) not in _SWITCHED:
        mma = copy_jit(epilogue.mma_tile, {switch: tl.constexpr(on)})
        shipped = (persistent.persistent_kernel, streamk.streamk_kernel, splitk.splitk_kernel)
        _SWITCHED[(switch, on)] = {k: copy_jit(k, {"mma_tile": mma}) for k in shipped}
    kernels = _SWITCHED[(switch, on)]
    plans = [plan_gemm(x, y, GemmConfig.from_key(key), out=o) for x, y, o in sets]
    for plan in plans:
        for step in plan.steps:
            if getattr(step, "kernel", None) in kernels:
                step.kernel = kernels[step.kernel]
    return plans


def gpu_name() -> str:
    """'h100' or 'h200', for the file names of the committed sweeps and results."""
    return "h200" if "H200" in torch.cuda.get_device_name() else "h100"


def in_workers(work: Callable[[list[T]], R], tasks: Sequence[T], workers: int = 8) -> list[R]:
    """``work`` on ``workers`` interleaved shares of ``tasks``, each in its own spawned process (compiling there
    fills the Triton cache this process then reads)."""
    shares = [list(tasks[i::workers]) for i in range(workers)]
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        return list(pool.map(work, shares))


# the copy rule's thresholds that copy every misaligned operand (``rule(COPY_ALL)``)
COPY_ALL = {"ALIGN_COPY_MIN_FLOPS": 0.0, "ALIGN_COPY_MIN_REUSE": 1}


def warm(tasks: list[tuple[int, int, int, str, bool]]) -> int:
    """Compile (run once) each (M, N, K, config, copy every misaligned operand) in this process; the binaries land in
    the Triton cache (``in_workers(warm, tasks)``).  Configs that cannot run the problem are skipped."""
    device = torch.device("cuda")
    done = 0
    for m, n, k, key, copy_all in tasks:
        a, b = make_inputs(m, n, k, "bf16", "nn", device)
        try:
            with rule(COPY_ALL if copy_all else {}):
                plan_gemm(a, b, GemmConfig.from_key(key)).run()
            done += 1
        except ConfigError:
            pass
        del a, b
        torch.cuda.empty_cache()  # the workers share the GPU's memory (the llm suite's operands are up to 2 GB)
    torch.cuda.synchronize()
    return done


def warm_plans(tasks: list[tuple[int, int, int, str, Any]], plans_for: Callable[..., list[Any]]) -> int:
    """Compile (run once) each (M, N, K, config, extra) through ``plans_for(sets, config, extra)`` in this process: the
    experiments that swap kernels into a plan (``in_workers(functools.partial(warm_plans, plans_for=...), tasks)``).
    Candidates whose plan raises ConfigError or ValueError are skipped (and printed); the count compiled is returned."""
    device = torch.device("cuda")
    done = 0
    for m, n, k, key, extra in tasks:
        a, b = make_inputs(m, n, k, "bf16", "nn", device)
        out = torch.empty((m, n), device=device, dtype=torch.bfloat16)
        try:
            plans_for([(a, b, out)], key, extra)[0].run()
            done += 1
        except (ConfigError, ValueError) as error:  # a candidate that cannot run the problem: said, not fatal
            print(m, n, k, key, "skipped:", type(error).__name__, str(error)[:160], flush=True)
        torch.cuda.synchronize()
        del a, b, out
        torch.cuda.empty_cache()  # the workers share the GPU's memory
    return done


def first_right(plans: list[Any], out: torch.Tensor, ref: torch.Tensor, *label: object, poison: bool = True) -> bool:
    """Run the first of ``plans`` into ``out`` (poisoned with NaN first unless ``poison`` is off) and compare it with
    ``ref``; False (and a printed line naming ``label``) when the result is wrong."""
    if poison:
        out.fill_(float("nan"))
    plans[0].run()
    err = ((out.float() - ref).abs().max() / ref.abs().max()).item()
    if not err < 1e-2:
        print(*label, "wrong result", err, flush=True)
        return False
    return True


def fastest(configs: dict[str, float | None], count: int) -> list[str]:
    """The ``count`` fastest timed configs of a sweep's shape (``ShapeResult.configs``), fastest first."""
    return [key for _, key in sorted((ms, key) for key, ms in configs.items() if ms)[:count]]


def sweep_shapes(
    gpu: str, suites: Sequence[str], candidates: Callable[[Any], list[str]]
) -> list[tuple[str, int, int, int, list[str], list[str]]]:
    """(suite:name, M, N, K, the sweep's three fastest configs, ``candidates(shape)``) for every shape of the committed
    ``suites`` sweeps of this GPU whose candidates are not empty: the work list of ``time_candidates``."""
    from theodolite.results import load_results

    out = []
    for suite in suites:
        for s in load_results(f"reports/results/validate-{suite}-{gpu}.json").shapes:
            extra = candidates(s)
            if extra:
                out.append((f"{suite}:{s.name}", s.M, s.N, s.K, fastest(s.configs, 3), extra))
    return out


def time_all(timer: Timer, calls: dict[str, list[Callable[[], Any]]]) -> dict[str, float]:
    """Median ms per call of every candidate, side by side (``Timer.interleaved``, none cut early)."""
    keys = list(calls)
    return dict(zip(keys, timer.interleaved([calls[c] for c in keys], keep=range(len(keys))), strict=True))


def validate_inputs(m: int, n: int, k: int, timer: Timer) -> tuple[Any, list[tuple[Any, Any, Any]], dict[str, Any]]:
    """``validate``'s inputs for a bf16 M x N x K problem (copies rotated through L2 when they fit, else one set timed
    L2-flushed): (those inputs, their (A, B, out) sets, torch.matmul's calls on them)."""
    inputs = _shape_inputs(m, n, k, "bf16", "nn", timer, rotate=True)
    return inputs, [(a, b, o) for a, b, _, o in inputs.sets], {"torch": inputs.torch_fns}


def time_as_validate(timer: Timer, inputs: Any, calls: dict[str, list[Callable[[], Any]]]) -> dict[str, float]:
    """Median ms per call of every candidate, side by side, as ``validate`` times the shape of ``inputs``: graph replays
    over the rotated copies, or L2-flushed runs of the one set."""
    if inputs.rotation:
        return time_all(timer, calls)
    return dict(zip(calls, timer.flushed_interleaved([c[0] for c in calls.values()]), strict=True))


def merge_times(times_path: str, results_path: str, keys: Sequence[str], script: str) -> tuple[int, float]:
    """Add the times (ms) of configs ``keys`` that ``script`` measured (``write_rows``'s file ``times_path``) to the
    shapes of the committed results file that lack them, so it again holds every config of the space; (times added, the
    closest any comes to its shape's sweep best, as best / its time).  No GPU."""
    from theodolite.results import load_results, save_results

    with open(times_path) as stream:
        data = json.load(stream)
    timed = {(r["M"], r["N"], r["K"], r["config"]): r["us"] * 1e-3 for r in data["rows"] if r["config"] in keys}
    results = load_results(results_path)
    added, closest = 0, 0.0
    for shape in results.shapes:
        best = min(t for t in shape.configs.values() if t)
        for key in keys:
            ms = timed.get((shape.M, shape.N, shape.K, key))
            if ms is not None and key not in shape.configs:
                shape.configs[key] = ms
                added += 1
                closest = max(closest, best / ms)
    results.command += f" | {script} --merge {os.path.basename(times_path)}"
    save_results(results, results_path)
    return added, closest


@contextlib.contextmanager
def rule(settings: dict[str, float]) -> Iterator[None]:
    """``kernels.config``'s copy-rule thresholds set to ``settings`` inside the block."""
    saved = {name: getattr(config_module, name) for name in settings}
    for name, value in settings.items():
        setattr(config_module, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(config_module, name, value)


def rotated_inputs(
    m: int, n: int, k: int, timer: Timer, device: torch.device, layout: str = "nn"
) -> tuple[list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]], dict[str, list[Any]], torch.Tensor]:
    """(A, B, out) sets enough to rotate through twice the L2 (one when they do not fit), torch.matmul's calls on
    them, and the fp32 reference product of the first."""
    a, b = make_inputs(m, n, k, "bf16", layout, device, seed=m + n + k)
    out = torch.empty((m, n), device=device, dtype=torch.bfloat16)
    copies = rotation_count((a.numel() + b.numel() + out.numel()) * 2, timer.l2)
    sets = [(a, b, out)] + [(a.clone(), b.clone(), out.clone()) for _ in range(max(copies, 1) - 1)]
    calls: dict[str, list[Any]] = {"torch": [lambda x=x, y=y, o=o: torch.matmul(x, y, out=o) for x, y, o in sets]}
    return sets, calls, torch.matmul(a.float(), b.float())


def checked_runs(
    sets: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]], key: str, ref: torch.Tensor, settings: dict[str, float]
) -> list[Callable[[], Any]] | None:
    """Each set's launch of config ``key`` planned under the copy rule ``settings``, the first checked against
    ``ref``; None where the config cannot run the problem (a TMA config beside an uncopied misaligned operand)
    or gives a wrong result (printed)."""
    try:
        with rule(settings):
            plans = [plan_gemm(x, y, GemmConfig.from_key(key), out=o) for x, y, o in sets]
    except ConfigError:
        return None
    if not first_right(plans, sets[0][2], ref, key, settings, poison=False):
        return None
    return [plan.run for plan in plans]


def add_runs(
    calls: dict[str, Any],
    sets: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]],
    keys: Sequence[str],
    ref: torch.Tensor,
    settings: dict[str, float] | None = None,
) -> None:
    """``calls[key]``: each set's checked launch of config ``key`` (``checked_runs``), for every key that can run the
    problem and gives the right result."""  # fmt: skip
    for key in keys:
        runs = checked_runs(sets, key, ref, settings or {})
        if runs is not None:
            calls[key] = runs


def way_rows(name: str, m: int, n: int, k: int, times: dict[str, float], **extra: Any) -> list[dict[str, Any]]:
    """One results row per timed candidate named 'config@way' (torch.matmul's way '-'), in us, ``extra`` fields
    before the config: what the experiments that time each config two ways write."""
    rows = []
    for c, t in times.items():
        key, _, way = c.partition("@")
        rows.append({"shape": name, "M": m, "N": n, "K": k, **extra, "config": key, "way": way or "-", "us": t * 1e3})
    return rows


def shape_rows(m: int, n: int, k: int, times: dict[str, float]) -> list[dict[str, Any]]:
    """One results row per timed candidate of an M x N x K shape, in us."""
    return [{"M": m, "N": n, "K": k, "config": c, "us": t * 1e3} for c, t in times.items()]


def print_times(m: int, n: int, k: int, times: dict[str, float], digits: int = 2) -> None:
    """'MxNxK: candidate=us ...', one line per shape."""
    print(f"{m}x{n}x{k}: " + " ".join(f"{c}={t * 1e3:.{digits}f}" for c, t in times.items()), flush=True)


def best_by_way(times: dict[str, float], ways: Sequence[str]) -> dict[str, float]:
    """The fastest time of each way's candidates ('config@way'; inf where none ran)."""
    return {w: min((t for c, t in times.items() if c.endswith("@" + w)), default=float("inf")) for w in ways}


def write_rows(name: str, command: str, rows: list[dict[str, Any]], **extra: Any) -> str:
    """``$OUT/<name>.json`` with the device, versions, the command, the rows and any ``extra`` keys; its path."""
    path = os.path.join(os.environ.get("OUT", "."), f"{name}.json")
    with open(path, "w") as stream:
        json.dump({"device": torch.cuda.get_device_name(), "triton": triton.__version__, "torch": torch.__version__,
                   "command": command, **extra, "rows": rows}, stream, indent=1)  # fmt: skip
    return path


def add_swapped_runs(
    calls: dict[str, Any],
    sets: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]],
    keys: Sequence[str],
    ref: torch.Tensor,
    plans_for: Callable[..., list[Any]],
    name: str,
) -> None:
    """``calls[key]``: each set's run of ``plans_for(sets, key)`` for every key whose plans can be made (ConfigError or
    ValueError: printed, skipped, as in ``warm_plans``) and give the right result."""
    for key in keys:
        try:
            plans = plans_for(sets, key)
        except (ConfigError, ValueError) as error:
            print(name, key, "failed:", type(error).__name__, str(error)[:160], flush=True)
            continue
        if first_right(plans, sets[0][2], ref, name, key):
            calls[key] = [p.run for p in plans]


def time_candidates(
    todo: Sequence[tuple[str, int, int, int, list[str], list[str]]],
    label: str,
    file_name: str,
    script: str,
    plans_for: Callable[..., list[Any]] | None = None,
) -> str:
    """Compile, then time each shape's candidate configs beside its sweep's fastest and torch.matmul (as ``validate``
    times a shape), printing a line per shape (``label``: the candidates' name there); ``$OUT/<file_name>.json``.
    ``todo``: (suite:name, M, N, K, the sweep's fastest configs, the candidates) per shape; its path is returned.
    ``plans_for(sets, key)``: the candidates' plans, where an experiment swaps its kernel into them (else
    ``plan_gemm``'s); one that raises ConfigError or ValueError is skipped, one with a wrong result left out."""
    # compiled on the shape itself (its load class)
    own = plans_for is None
    tasks = sorted({(m, n, k, key, False) for _, m, n, k, best, extra in todo for key in best + extra * own})
    print("warmed", sum(in_workers(warm, tasks)), "of", len(tasks), "shapes", len(todo), flush=True)
    if plans_for is not None:
        swapped = sorted({(m, n, k, key, None) for _, m, n, k, _, extra in todo for key in extra})
        warmed = sum(in_workers(functools.partial(warm_plans, plans_for=plans_for), swapped))
        print("warmed", warmed, "of", len(swapped), "candidates", flush=True)
    timer = Timer()
    rows = []
    for name, m, n, k, best, extra in todo:
        inputs, sets, calls = validate_inputs(m, n, k, timer)
        ref = inputs.ref.float()
        add_runs(calls, sets, best + extra * own, ref)
        if plans_for is not None:
            add_swapped_runs(calls, sets, extra, ref, plans_for, name)
        times = time_as_validate(timer, inputs, calls)
        for c, t in times.items():
            rows.append({"shape": name, "M": m, "N": n, "K": k, "config": c, "us": t * 1e3, "sweep": c in best})
        old = min(times[c] for c in best if c in times)
        new, top = min(((times[c], c) for c in extra if c in times), default=(math.inf, "-"))
        print(f"{name} {m}x{n}x{k}: torch {times['torch'] * 1e3:.2f} us, sweep best {old * 1e3:.2f} "
              f"(x{times['torch'] / old:.3f}), {label} best {new * 1e3:.2f} (x{times['torch'] / new:.3f}) {top}",
              flush=True)  # fmt: skip
    command = f"PYTHONPATH=$PWD OUT=$OUT python3 experiments/{script}"
    return write_rows(file_name, command, rows)


def time_switch(
    todo: Sequence[tuple[str, int, int, int, str, list[str]]], switch: str, ways: tuple[str, str], file_name: str,
    script: str,
) -> str:  # fmt: skip
    """Time each shape's configs with the ``kernels.epilogue`` switch ``switch`` off and on (named ``ways``), side by
    side beside torch.matmul as ``validate`` times a shape; print each way's best per shape and the geomean of best off
    over best on; ``$OUT/<file_name>.json`` (its path).  ``todo``: (name, M, N, K, load class, configs) per shape."""
    plans_for = functools.partial(switched_plans, switch=switch)
    tasks = sorted({(m, n, k, key, on) for _, m, n, k, _, keys in todo for key in keys for on in (False, True)})
    print("warmed", sum(in_workers(functools.partial(warm_plans, plans_for=plans_for), tasks)), "shapes", len(todo),
          flush=True)  # fmt: skip
    timer = Timer()
    rows, ratios = [], []
    for name, m, n, k, loads, keys in todo:
        inputs, sets, calls = validate_inputs(m, n, k, timer)
        ref = inputs.ref.float()
        for key in keys:
            for on in (False, True):
                plans = plans_for(sets, key, on)
                if first_right(plans, sets[0][2], ref, name, key, on):
                    calls[f"{key}@{ways[on]}"] = [p.run for p in plans]
        torch.cuda.synchronize()
        times = time_as_validate(timer, inputs, calls)
        rows += way_rows(name, m, n, k, times, loads=loads)
        best = best_by_way(times, ways)
        ratios.append(best[ways[0]] / best[ways[1]])
        print(f"{name} {m}x{n}x{k} {loads}: torch {times['torch'] * 1e3:.2f} us, "
              + ", ".join(f"{w} {best[w] * 1e3:.2f} (x{times['torch'] / best[w]:.3f})" for w in ways), flush=True)  # fmt: skip
    if ratios:
        print(f"best {ways[0]} / best {ways[1]}, geomean over {len(ratios)} shapes: "
              f"{math.exp(sum(map(math.log, ratios)) / len(ratios)):.3f}", flush=True)  # fmt: skip
    command = f"PYTHONPATH=$PWD OUT=$OUT python3 experiments/{script}"
    path = write_rows(file_name, command, rows)
    print("wrote", path, file=sys.stderr)
    return path


def bench_configs(shapes: Sequence[tuple[str, int, int, int]], keys: Sequence[str], path: str, dtype: str,
                  layout: str) -> None:
    """``python -m theodolite bench`` of these configs (any key, in the space or not) on (name, M, N, K) shapes,
    torch.matmul side by side, into the results file ``path``."""
    with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as csv:
        csv.write("name,M,N,K\n" + "".join(f"{name},{m},{n},{k}\n" for name, m, n, k in shapes))
    args = [a for key in keys for a in ("--config", key)]
    command = [sys.executable, "-m", "theodolite", "bench", "--shapes", csv.name, "--dtype", dtype, "--layout", layout]
    subprocess.run([*command, *args, "-o", path], check=True)


@dataclass
class BenchedShape:
    """One shape of a ``bench_configs`` results file beside the model: (measured, model) microseconds of each of the
    experiment's configs that was timed, and the model's detail term ``name`` of a config (``term``)."""

    row: dict[str, Any]  # the results file's shape entry
    layout: str
    times: dict[str, tuple[float, float]]
    terms: dict[str, Any]
    index: dict[str, int]

    def term(self, key: str, name: str) -> float:
        return float(self.terms[name][self.index[key]])


def benched_shapes(path: str, profile_path: str, keys: Sequence[str]) -> Iterator[BenchedShape]:
    """Each shape of the results file ``path`` with ``keys`` priced on ``profile_path`` (keys off the config space
    priced beside it), in the file's dtype and each shape's layout: what the ``bench --config`` experiments'
    ``--summary`` modes set side by side."""
    from theodolite.model.predict import ConfigTable, evaluate

    from theodolite.profile.hdf5 import load_profile

    with open(path) as stream:
        data = json.load(stream)
    settings = data.get("settings", {})
    dtype = settings.get("dtype", "bf16")
    table = ConfigTable(load_profile(profile_path), dtype, extra=tuple(GemmConfig.from_key(key) for key in keys))
    for row in data["shapes"]:
        layout = row.get("layout", settings.get("layout", "nn"))
        seconds, terms = evaluate(table, Problem(row["M"], row["N"], row["K"], dtype=dtype, layout=layout), detail=True)
        timed = [key for key in keys if row["configs"].get(key) and key in table.index]
        yield BenchedShape(
            row, layout, {key: (row["configs"][key] * 1e3, float(seconds[table.index[key]]) * 1e6) for key in timed},
            terms, {key: table.index[key] for key in timed},
        )  # fmt: skip


def print_k_steps(path: str, profile_path: str, keys: Sequence[str], grids: Sequence[str]) -> None:
    """ns a K-step of each config on each grid, measured / model: a grid's shapes are named ``GRID-k<K>``; the two
    smallest K are differenced (fixed costs cancel) and divided by the config's waves and the steps between them."""
    by: dict[tuple[str, str], dict[int, tuple[float, float, float, float]]] = {}
    for shape in benched_shapes(path, profile_path, keys):
        grid = str(shape.row["name"]).split("-")[0]
        for key, (measured, model) in shape.times.items():
            runs = by.setdefault((key, grid), {})
            runs[shape.row["K"]] = (measured, model, shape.term(key, "#waves"), shape.term(key, "#iterations"))
    print(f"{'config':38s} {'grid':6s} {'waves':>5s}  ns a K-step measured / model")
    for (key, grid), runs in sorted(by.items(), key=lambda item: (item[0][0], list(grids).index(item[0][1]))):
        if len(runs) < 2:
            continue
        (m1, p1, waves, s1), (m2, p2, _, s2) = (runs[k] for k in sorted(runs)[:2])
        per = 1e3 / (waves * (s2 - s1))
        print(f"{key:38s} {grid:6s} {waves:5.0f}  {(m2 - m1) * per:6.0f} / {(p2 - p1) * per:6.0f}")


def k_steps_main(output: str, grids: Sequence[tuple[str, int, int]], ks: Sequence[int], keys: Sequence[str], dtype: str,
                 layout: str) -> None:
    """A K-step experiment's command line: on the GPU each ``(name, M, N)`` grid at every K of ``ks`` through ``keys``
    into ``$OUT/output`` (shapes named ``GRID-k<K>``); ``--summary F PROFILE`` prints ``print_k_steps``."""

    def run(out: str) -> None:
        shapes = [(f"{name}-k{k}", m, n, k) for name, m, n in grids for k in ks]
        bench_configs(shapes, keys, os.path.join(out, output), dtype, layout)

    def summary(path: str, profile_path: str) -> None:
        print_k_steps(path, profile_path, keys, [name for name, _, _ in grids])

    dispatch(run, summary)


@dataclass
class SweptShape:
    """One aligned shape of a committed sweep, priced by the model: its timings by config key, the model's times and
    detail terms over ``table``'s configs, and which of them are legal."""

    table: Any  # model.predict.ConfigTable
    measured: dict[str, float]
    times: Any
    terms: dict[str, Any]
    legal: Any


def aligned_sweep_shapes(profile_path: str, paths: Sequence[str]) -> Iterator[SweptShape]:
    """Every shape of the committed sweeps whose operands load 16 bytes at a time, priced by the profile's model."""
    from pathlib import Path

    from fit_cv import sweep_timings
    from theodolite.kernels.config import load_widths
    from theodolite.model.predict import ConfigTable, evaluate

    from theodolite.profile.hdf5 import load_profile

    profile = load_profile(profile_path)
    tables: dict[str, ConfigTable] = {}
    for path in paths:
        shapes: dict[tuple[int, int, int, str, str], dict[str, float]] = {}
        for t in sweep_timings(Path(path)):
            shapes.setdefault((t.m, t.n, t.k, t.layout, t.dtype), {})[t.key] = t.seconds
        for (m, n, k, layout, dtype), measured in shapes.items():
            problem = Problem(m, n, k, dtype=dtype, layout=layout)
            if min(load_widths(problem)) < 16:
                continue
            table = tables.setdefault(dtype, ConfigTable(profile, dtype))
            times, terms = evaluate(table, problem, detail=True)
            yield SweptShape(table, measured, times, terms, table.legal_mask(problem))


def sweep_residuals(profile_path: str, paths: Sequence[str]) -> Iterator[tuple[GemmConfig, dict[str, float], float]]:
    """(config, its model terms, log(measured / predicted) less its shape's median) for every timed config the model
    calls legal, over the aligned shapes (16-byte loads) of committed sweeps: residuals within a shape, so a term the
    model misses for one kind of config shows against the others of the same shape, all of them, not the fastest."""
    import numpy as np

    for shape in aligned_sweep_shapes(profile_path, paths):
        index, legal, times = shape.table.index, shape.legal, shape.times
        rows = [(index[key], s) for key, s in shape.measured.items() if key in index and legal[index[key]]]
        if len(rows) < 4:
            continue
        logs = [math.log(s / times[i]) for i, s in rows]
        middle = float(np.median(logs))
        for (i, _), value in zip(rows, logs, strict=True):
            yield shape.table.configs[i], {name: float(v[i]) for name, v in shape.terms.items()}, value - middle


def dispatch(run: Callable[[str], None], summary: Callable[[str, str], None],
             sweeps: Callable[[str, list[str]], None] | None = None) -> None:
    """An experiment's modes from its command line: ``--summary F.json PROFILE`` and, where it has one, ``--sweeps
    PROFILE RESULTS...`` (no GPU), else ``run($OUT)`` on the GPU."""
    if len(sys.argv) > 1 and sys.argv[1] == "--summary":
        summary(sys.argv[2], sys.argv[3])
    elif len(sys.argv) > 1 and sys.argv[1] == "--sweeps" and sweeps is not None:
        sweeps(sys.argv[2], sys.argv[3:])
    else:
        run(os.environ.get("OUT", "."))
