"""Validation harness: the model's pick against the exhaustive oracle, torch.matmul and peers, per shape.

For each shape, one run times side by side (``theodolite.kernels.benchmark``'s timer: fresh random
inputs, outputs checked against torch.matmul, median of L2-flushed runs): torch.matmul, every legal
config of the kernels' space (the oracle), and therefore the model's pick and each peer's pick
(a fixed 128x128x64 config, nvMatmulHeuristics' pick mapped onto our nearest legal config, and
optionally Triton's autotune procedure over the same space, whose wall time is reported).

The results file (``theodolite.results``) is rewritten after every shape, so ``--resume`` continues
an interrupted sweep, ``--shard i/n`` splits one over several machine calls (merge with
``--merge``), and ``--budget-s`` stops before a shape that would not fit.  Measurement, model,
peers and the clock are injected, so the bookkeeping is tested on a CPU with fake timings.

``summarize(results)`` is the one place the summary figures are computed (harness and report page).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from theodolite.errors import TheodoliteError
from theodolite.kernels.config import DTYPE_BYTES, GemmConfig, KernelLimits, Problem, legal_configs
from theodolite.results import TORCH_KEY, Results, ShapeResult, finite_ms, load_results, save_results

PEERS = ("fixed", "nvmmh", "autotune")
FIXED_CONFIG = GemmConfig("persistent", 128, 128, 64, 8, 8, 3, flatten=True)  # the space's entry (flattened loop)


class ValidationError(TheodoliteError):
    """A validation request that cannot be carried out (bad shard, no GPU, unknown peer, ...)."""


# ----------------------------------------------------------------------------------------------
# shapes, shards, resume
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Shape:
    name: str
    m: int
    n: int
    k: int
    dtype: str = "bf16"
    layout: str = "nn"
    batch: int = 1

    @property
    def key(self) -> tuple[Any, ...]:
        return (self.name, self.m, self.n, self.k, self.dtype, self.layout, self.batch)

    @property
    def problem(self) -> Problem:
        return Problem(self.m, self.n, self.k, dtype=self.dtype, batch=self.batch, layout=self.layout)


def result_key(shape: ShapeResult) -> tuple[Any, ...]:
    return (shape.name, shape.M, shape.N, shape.K, shape.dtype, shape.layout, shape.batch)


def load_shapes(spec: str, dtype: str = "bf16", layout: str = "nn") -> list[Shape]:
    """Shapes of a suite (llm, random-dev, square, random:N:seed, decode, wide:N:seed, or a CSV with optional
    dtype/layout columns)."""
    from theodolite.kernels.shapes import load_suite_rows

    shapes = []
    for row in load_suite_rows(spec):
        shape = Shape(
            row["name"],
            int(row["M"]),
            int(row["N"]),
            int(row["K"]),
            (row.get("dtype") or dtype).strip(),
            (row.get("layout") or layout).strip(),
        )
        if shape.dtype not in DTYPE_BYTES:
            raise ValidationError(f"shape {shape.name}: unknown dtype {shape.dtype!r}")
        shapes.append(shape)
    return shapes


def parse_shard(text: str | None) -> tuple[int, int]:
    """'i/n' with 0 <= i < n (shard i of n, zero-based) -> (i, n); None -> (0, 1)."""
    if text is None:
        return 0, 1
    try:
        index, count = (int(part) for part in text.split("/"))
    except ValueError:
        raise ValidationError(f"bad --shard {text!r}: expected i/n, e.g. 0/4 (zero-based)") from None
    if count < 1 or not 0 <= index < count:
        raise ValidationError(f"bad --shard {text!r}: need 0 <= i < n (zero-based shard index)")
    return index, count


def shard_of(shapes: Sequence[Shape], index: int, count: int) -> list[Shape]:
    """Every count-th shape starting at index: shards interleave, so each gets small and large shapes."""
    return list(shapes[index::count])


def add_peer_picks(results: Results, peers: Sequence[str] = ("fixed", "nvmmh"), nvmmh: Any = None) -> int:
    """Fill fixed/nvmmh picks after the fact (CPU): they map onto configs the sweep already timed.

    The candidates are the configs of each shape's results (the legal set the sweep timed), so no
    profile and no GPU are needed.  Returns how many picks were added.
    """
    added = 0
    for shape in results.shapes:
        candidates = []
        for key in shape.configs:
            try:
                candidates.append(GemmConfig.from_key(key))
            except TheodoliteError:
                continue
        if not candidates:
            continue
        problem = Problem(shape.M, shape.N, shape.K, dtype=shape.dtype, batch=shape.batch, layout=shape.layout)
        if "fixed" in peers and "fixed" not in shape.peer_picks:
            fixed = fixed_pick(problem, candidates)
            if fixed is not None:
                shape.peer_picks["fixed"] = fixed.key
                added += 1
        if "nvmmh" in peers and "nvmmh" not in shape.peer_picks:
            peer = nvmmh or NvmmhPeer(results.device)
            nvmmh = peer
            picked = peer.pick(problem, candidates)
            if picked is not None:
                shape.peer_picks["nvmmh"] = picked.key
                added += 1
    if nvmmh is not None:
        results.settings["nvmmh_gpu"] = getattr(nvmmh, "gpu_name", None) or "present device"
    return added


def add_model_picks(results: Results, profile: Any, pick: Callable[[Problem, Any], ModelPick] | None = None) -> int:
    """Fill the model's pick and predictions into a results file whose every legal config was timed (CPU).

    A ``bench`` sweep times the exhaustive oracle side by side with torch.matmul; the model only chooses
    among those configs, so its picks can be scored afterwards without the GPU.  A pick the file did not
    time is recorded under ``errors['@model']``.  Returns how many shapes got a pick.
    """
    choose = pick or model_pick
    picked = 0
    for shape in results.shapes:
        problem = Problem(shape.M, shape.N, shape.K, dtype=shape.dtype, batch=shape.batch, layout=shape.layout)
        chosen = choose(problem, profile)
        shape.model_pick = chosen.key
        shape.model_predicted_ms = dict(chosen.predicted_ms)
        shape.model_bottleneck = chosen.bottleneck
        shape.selection_us = chosen.selection_us
        shape.errors.pop("@model", None)
        if chosen.error:
            shape.errors["@model"] = chosen.error
        elif chosen.key not in shape.configs:
            shape.errors["@model"] = f"model picked {chosen.key}, which this file did not time"
        if chosen.key:
            picked += 1
    results.profile_fingerprint = str(getattr(profile, "fingerprint", ""))
    results.profile_path = str(getattr(profile, "origin", ""))
    results.settings["model_picks"] = "added after the sweep on the CPU (selection_us measured there)"
    return picked


def merge_files(paths: Sequence[str | Path], output: str | Path) -> Results:
    """Join shard files into one; a later file wins on a repeated shape (a re-measurement replaces it)."""
    from theodolite.results import merge_results

    parts = [load_results(path) for path in paths]
    merged = merge_results(parts)
    merged.settings = {**merged.settings, "merged_from": [str(p) for p in paths]}
    merged.settings.pop("shard", None)
    merged.settings.pop("stopped_for_budget", None)
    merged.settings["incomplete"] = any(bool(part.settings.get("incomplete")) for part in parts)
    repeated = sum(len(part.shapes) for part in parts) - len(merged.shapes)  # re-measured shapes replace
    merged.settings["shapes_total"] = (
        sum(int(part.settings.get("shapes_total", len(part.shapes))) for part in parts) - repeated
    )
    merged.settings["wall_s"] = round(sum(float(part.settings.get("wall_s", 0.0)) for part in parts), 2)
    save_results(merged, output)
    return merged


def load_validation_profile(spec: str | None) -> Any:
    """A profile path, ``datasheet:NAME`` (e.g. datasheet:h100-sxm), or None for the resolved one."""
    if spec is not None and spec.startswith("datasheet:"):
        from theodolite.profile.datasheet import DATASHEETS

        name = spec.split(":", 1)[1]
        if name not in DATASHEETS:
            raise ValidationError(f"no datasheet {name!r}; expected one of {', '.join(sorted(DATASHEETS))}")
        return DATASHEETS[name]()
    from theodolite.profile import load as load_profile

    return load_profile(spec)


# ----------------------------------------------------------------------------------------------
# picks: the model and the peers
# ----------------------------------------------------------------------------------------------


@dataclass
class ModelPick:
    key: str | None
    predicted_ms: dict[str, float] = field(default_factory=dict)
    bottleneck: str | None = None
    selection_us: float | None = None
    error: str | None = None


def model_pick(problem: Problem, profile: Any, repeats: int = 5) -> ModelPick:
    """What ``theodolite.select`` picks (the fast path users get), every legal config's predicted time
    (for the rank correlation), and the host time of a selection that misses the per-shape cache."""
    try:
        from theodolite import api, model
    except ImportError as error:
        return ModelPick(None, error=f"theodolite.model unavailable: {error}")
    rank = getattr(model, "rank", None)
    if rank is None:
        return ModelPick(None, error="theodolite.model has no rank() yet")
    p = problem
    plain = Problem(p.m, p.n, p.k, dtype=p.dtype, layout=p.layout, batch=p.batch, out_dtype=p.out_dtype)

    def selection() -> Any:
        if problem == plain:  # contiguous operands: the public entry point, as users call it
            return api.select(p.m, p.n, p.k, dtype=p.dtype, layout=p.layout, batch=p.batch, out_dtype=p.out_dtype,
                              profile=profile)  # fmt: skip
        return api._select_problem(problem, profile)

    try:
        predictions = rank(problem, profile)
        selection()  # warm the profile's tables: a steady-state new-shape selection
        samples = []
        for _ in range(repeats):
            api._CACHE.clear()  # a selection that misses the per-shape cache
            start = time.perf_counter()
            chosen = selection()
            samples.append((time.perf_counter() - start) * 1e6)
        bottleneck = chosen.bottleneck
    except Exception as error:  # the model is under test: record, do not abort the sweep
        return ModelPick(None, error=f"model failed: {type(error).__name__}: {str(error)[:300]}")
    predicted = {p.config.key: float(p.time_s) * 1e3 for p in predictions if math.isfinite(p.time_s)}
    return ModelPick(chosen.config.key, predicted, bottleneck, float(statistics.median(samples)))


def _log2(a: float, b: float) -> float:
    return abs(math.log2(max(a, 1) / max(b, 1)))


def nearest_config(
    target: dict[str, int], legal: Sequence[GemmConfig], preferred_variants: Sequence[str] = ()
) -> GemmConfig | None:
    """The legal config closest to a (tile, warps, stages, split-k) answer, on log2 distances."""
    if not legal:
        return None
    order = {v: i for i, v in enumerate(preferred_variants)}

    def distance(config: GemmConfig) -> tuple[float, str]:
        d = (
            _log2(config.block_m, target["block_m"])
            + _log2(config.tile_n, target["block_n"])
            + _log2(config.block_k, target["block_k"])
            + 0.5 * _log2(config.num_warps, target.get("num_warps", config.num_warps))
            + 0.25 * abs(config.num_stages - target.get("num_stages", config.num_stages))
            + _log2(config.split_k, target.get("split_k", 1))
            + 0.5 * order.get(config.variant, len(order))
        )
        return d, config.key

    return min(legal, key=distance)


def fixed_pick(problem: Problem, legal: Sequence[GemmConfig]) -> GemmConfig | None:
    """The fixed 128x128x64 w8 s3 persistent config (or the nearest legal one for this problem)."""
    if FIXED_CONFIG in legal:
        return FIXED_CONFIG
    target = {"block_m": 128, "block_n": 128, "block_k": 64, "num_warps": 8, "num_stages": 3, "split_k": 1}
    return nearest_config(target, legal, ("persistent", "tma", "streamk", "splitk"))


_NVMMH_PRECISION = {"fp16": "HSH", "bf16": "BSB", "tf32": "TST", "fp32": "SSS"}


class NvmmhPeer:
    """nvMatmulHeuristics (target TRITON) answers mapped onto our nearest legal config."""

    def __init__(self, device_name: str = "H100") -> None:
        try:
            import nvMatmulHeuristics as nv
        except ImportError as error:
            raise ValidationError(f"peer nvmmh needs the nvMatmulHeuristics package ({error})") from None
        self.nv = nv
        gpu = self.gpu_for(device_name)
        self.gpu_name = gpu
        flags = nv.NvMatmulHeuristicsFlags.PERF_MODEL_BASED_AUTO_TUNING
        kwargs: dict[str, Any] = {"backend": nv.NvMatmulHeuristicsTarget.TRITON, "flags": flags}
        if gpu is not None:
            kwargs["gpu"] = getattr(nv.NvMatmulHeuristicsNvidiaGpu, gpu)
        self.interface = nv.NvMatmulHeuristicsInterfaceEx(**kwargs)

    @staticmethod
    def gpu_for(device_name: str) -> str | None:
        """Predefined hardware for a device name; None lets the library read the present GPU."""
        name = device_name.upper().replace(" ", "")
        for marker, gpu in (
            ("H200", "H200_SXM"),
            ("H100PCIE", "H100_PCIE"),
            ("H100NVL", "H100_NVL"),
            ("H100", "H100_SXM"),
            ("H20", "H20_SXM"),
            ("A100", "A100_SXM_80GB"),
            ("B200", "B200"),
        ):
            if marker in name:
                return gpu
        return None

    def answer(self, problem: Problem) -> dict[str, int]:
        nv = self.nv
        layouts = {"nn": "NN_ROW_MAJOR", "nt": "NT_ROW_MAJOR", "tn": "TN_ROW_MAJOR", "tt": "TT_ROW_MAJOR"}
        layout = getattr(nv.NvMatmulHeuristicsMatmulLayout, layouts[problem.layout])
        nv_problem = self.interface.makeNvMatmulHeuristicsProblem(
            max(problem.m, 1), max(problem.n, 1), max(problem.k, 1), layout, max(problem.batch, 1)
        )
        answers = self.interface.get(nv_problem, 1, precision=_NVMMH_PRECISION.get(problem.dtype))
        if not answers:
            raise ValidationError(f"nvMatmulHeuristics returned no config for {problem}")
        kernel = answers[0]["kernel"]
        warps = max(
            1, (kernel.cta_tile_m // max(1, kernel.warp_tile_m)) * (kernel.cta_tile_n // max(1, kernel.warp_tile_n))
        )
        return {
            "block_m": int(kernel.cta_tile_m),
            "block_n": int(kernel.cta_tile_n),
            "block_k": int(kernel.cta_tile_k),
            "num_warps": int(warps),
            "num_stages": int(kernel.stages),
            "split_k": int(kernel.split_k),
        }

    def pick(self, problem: Problem, legal: Sequence[GemmConfig]) -> GemmConfig | None:
        target = self.answer(problem)
        variants = (
            ("splitk", "persistent", "tma", "streamk")
            if target["split_k"] > 1
            else ("persistent", "tma", "streamk", "splitk")
        )
        return nearest_config(target, legal, variants)


# ----------------------------------------------------------------------------------------------
# the harness
# ----------------------------------------------------------------------------------------------


@dataclass
class ValidateSettings:
    suite: str = "llm"
    dtype: str = "bf16"
    layout: str = "nn"
    peers: tuple[str, ...] = ("fixed", "nvmmh")
    shard: tuple[int, int] = (0, 1)
    resume: bool = False
    budget_s: float | None = None
    variants: tuple[str, ...] | None = None
    rep_ms: float = 8.0
    max_reps: int = 50
    precompile: bool = True
    workers: int = 0
    final: bool = True  # time the final round (torch, the sweep's best few and the picks side by side)


# measure(shape, configs) -> ShapeResult with torch_ms, configs, errors, max_rel_error filled in
Measure = Callable[[Shape, list[GemmConfig]], ShapeResult]
# final(shape, keys) -> (ms per key and TORCH_KEY, errors): the side-by-side final round
Final = Callable[[Shape, list[str]], tuple[dict[str, float], dict[str, str]]]
# autotune(shape, configs) -> (picked key, wall seconds)
Autotune = Callable[[Shape, list[GemmConfig]], tuple[str | None, float]]


@dataclass
class Harness:
    """Everything the sweep touches from outside, injectable for tests."""

    profile: Any
    limits: KernelLimits
    measure: Measure
    pick: Callable[[Problem, Any], ModelPick] = model_pick
    nvmmh: Any = None  # an object with .pick(problem, legal)
    autotune: Autotune | None = None
    final: Final | None = None
    clock: Callable[[], float] = time.monotonic
    log: Callable[[str], None] = print
    save: Callable[[Results, Any], Any] = save_results


def _new_results(settings: ValidateSettings, harness: Harness, device: str, command: str) -> Results:
    profile = harness.profile
    return Results(
        device=device,
        command=command,
        created_utc=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        profile_fingerprint=str(getattr(profile, "fingerprint", "")),
        profile_path=str(getattr(profile, "origin", "")),
        settings={
            "kind": "validate",
            "suite": settings.suite,
            "dtype": settings.dtype,
            "layout": settings.layout,
            "peers": list(settings.peers),
            "shard": f"{settings.shard[0]}/{settings.shard[1]}",
            "variants": list(settings.variants or ()),
            "rep_ms": settings.rep_ms,
            "max_reps": settings.max_reps,
            "fixed_config": FIXED_CONFIG.key,
            "timing": (
                "inputs over L2/2: median of L2-flushed CUDA-event runs (do_bench method); smaller: median GPU time"
                " per call of CUDA-graph replays of back-to-back calls rotating input copies (> 2x L2, at most 32;"
                " host launch cost excluded); torch.matmul side by side; then the final round"
            ),
        },
    )


def validate_shape(shape: Shape, harness: Harness, settings: ValidateSettings) -> ShapeResult:
    """One shape: picks first (model, peers), then one measurement of torch.matmul and every legal config."""
    problem = shape.problem
    legal = legal_configs(problem, harness.limits, harness.profile, settings.variants)
    picks: dict[str, str] = {}
    notes: dict[str, str] = {}
    chosen = harness.pick(problem, harness.profile)
    if chosen.error:
        notes["model"] = chosen.error
    extra: list[GemmConfig] = []
    if chosen.key is not None:
        config = GemmConfig.from_key(chosen.key)
        if config not in legal:
            notes["model"] = f"model picked {chosen.key}, which legal_configs does not list"
            extra.append(config)
    if "fixed" in settings.peers:
        fixed = fixed_pick(problem, legal)
        if fixed is not None:
            picks["fixed"] = fixed.key
    if "nvmmh" in settings.peers and harness.nvmmh is not None:
        try:
            nv = harness.nvmmh.pick(problem, legal)
            if nv is not None:
                picks["nvmmh"] = nv.key
        except Exception as error:
            notes["nvmmh"] = f"{type(error).__name__}: {str(error)[:200]}"
    try:
        result = harness.measure(shape, legal + extra)
    except Exception as error:  # e.g. out of memory for the inputs: record it and go on with the sweep
        result = ShapeResult(shape.name, shape.m, shape.n, shape.k, shape.dtype, shape.layout, shape.batch)
        notes["measure"] = f"{type(error).__name__}: {str(error)[:300]}"
        _release_memory()
    result.model_pick = chosen.key
    result.model_predicted_ms = dict(chosen.predicted_ms)
    result.model_bottleneck = chosen.bottleneck
    result.selection_us = chosen.selection_us
    if "autotune" in settings.peers and harness.autotune is not None:
        try:
            key, wall = harness.autotune(shape, legal)
            if key is not None:
                picks["autotune"] = key
            result.autotune_wall_s = wall
        except Exception as error:
            notes["autotune"] = f"{type(error).__name__}: {str(error)[:200]}"
    result.peer_picks = picks
    for who, note in notes.items():
        result.errors[f"@{who}"] = note
    if settings.final and harness.final is not None:
        time_final_round(result, harness.final)
    return result


FINAL_TOP = 4  # the sweep's fastest configs that go into the final round
FINAL_PREDICTED = 3  # and the model's best-predicted ones (a refit's new pick is then often already there)


def final_candidates(result: ShapeResult, top: int = FINAL_TOP, predicted: int = FINAL_PREDICTED) -> list[str]:
    """Configs of the final round: the sweep's ``top`` fastest, the model's pick and ``predicted`` best
    predictions, the peers' picks; only configs the sweep ran (a failed one would fail again)."""
    measured = {key: ms for key, ms in result.configs.items() if finite_ms(ms)}
    keys = sorted(measured, key=lambda key: (measured[key], key))[:top]
    if result.model_pick:
        keys.append(result.model_pick)
    by_prediction = sorted((ms, key) for key, ms in result.model_predicted_ms.items() if key in measured)
    keys += [key for _, key in by_prediction[:predicted]]
    keys += list(result.peer_picks.values())
    return [key for key in dict.fromkeys(keys) if key in measured]


def time_final_round(result: ShapeResult, final: Final) -> None:
    """Fill ``result.final_ms`` (errors under ``@final KEY``); a failure is recorded, not raised."""
    shape = Shape(result.name, result.M, result.N, result.K, result.dtype, result.layout, result.batch)
    for key in [key for key in result.errors if key.startswith("@final")]:
        del result.errors[key]
    try:
        times, errors = final(shape, final_candidates(result))
    except Exception as error:
        result.final_ms = {}
        result.errors["@final"] = f"{type(error).__name__}: {str(error)[:300]}"
        _release_memory()
        return
    result.final_ms = times
    for key, message in errors.items():
        result.errors[f"@final {key}"] = message


def add_final_round(
    results: Results,
    final: Final,
    log: Callable[[str], None] = print,
    save: Callable[[], Any] | None = None,
    redo: bool = True,
) -> int:
    """Time the final round for every shape of an existing results file (GPU); returns shapes done.
    ``redo`` False skips shapes that have one (resuming an interrupted run)."""
    todo = [
        shape
        for shape in results.shapes
        if any(finite_ms(ms) for ms in shape.configs.values()) and (redo or not shape.final_ms)
    ]
    progress = _progress(len(todo))
    for index, shape in enumerate(todo):
        t0 = time.monotonic()
        time_final_round(shape, final)
        line = shape_line(shape, time.monotonic() - t0, index + 1, len(todo))
        progress(line)
        log(line)
        if save is not None and index % 20 == 19:
            save()
    return len(todo)


def _release_memory() -> None:
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
    except Exception:
        pass


def run_validation(
    shapes: Sequence[Shape],
    settings: ValidateSettings,
    harness: Harness,
    output: str | Path | None,
    device: str = "",
    command: str = "",
    started: float | None = None,
    versions: dict[str, str] | None = None,
) -> Results:
    """Sweep the (sharded) shapes, saving after each; resume skips shapes already in ``output``.

    The budget counts from ``started`` (default: now, on ``harness.clock``) and stops before a shape
    whose expected duration (the median so far) would overrun it.
    """
    start = harness.clock() if started is None else started
    mine = shard_of(shapes, *settings.shard)
    results: Results | None = None
    if settings.resume and output is not None and Path(output).is_file():
        results = load_results(output)
        if results.settings.get("shard") not in (None, f"{settings.shard[0]}/{settings.shard[1]}"):
            raise ValidationError(
                f"{output}: holds shard {results.settings.get('shard')}, not {settings.shard[0]}/{settings.shard[1]}"
            )
    if results is None:
        results = _new_results(settings, harness, device, command)
    for name, value in (versions or {}).items():
        setattr(results, name, value)
    done = {result_key(s) for s in results.shapes}
    todo = [shape for shape in mine if shape.key not in done]
    results.settings["shapes_total"] = len(mine)
    if done:
        harness.log(f"resuming: {len(mine) - len(todo)} of {len(mine)} shapes already in {output}")
    durations: list[float] = []
    progress = _progress(len(todo))
    stopped_for_budget = False
    for index, shape in enumerate(todo):
        elapsed = harness.clock() - start
        if settings.budget_s is not None:
            estimate = statistics.median(durations) if durations else 0.0
            if elapsed + estimate > settings.budget_s:
                harness.log(
                    f"budget: {elapsed:.0f}s spent, next shape ~{estimate:.0f}s, budget {settings.budget_s:.0f}s: "
                    f"stopping with {len(todo) - index} shape(s) left (rerun with --resume)"
                )
                stopped_for_budget = True
                break
        t0 = harness.clock()
        result = validate_shape(shape, harness, settings)
        durations.append(harness.clock() - t0)
        results.shapes.append(result)
        results.settings["incomplete"] = len(results.shapes) < len(mine)
        results.settings["wall_s"] = round(results.settings.get("wall_s", 0.0) + durations[-1], 2)
        if output is not None:
            harness.save(results, output)
        progress(shape_line(result, durations[-1]))
        harness.log(shape_line(result, durations[-1], index + 1, len(todo)))
    results.settings["incomplete"] = len(results.shapes) < len(mine)
    if stopped_for_budget:
        results.settings["stopped_for_budget"] = True
    if output is not None:
        harness.save(results, output)
    return results


def _progress(total: int) -> Callable[[str], None]:
    """A tqdm bar on stderr when tqdm is present and there is something to do; a no-op otherwise."""
    try:
        from tqdm import tqdm
    except ImportError:
        return lambda _text: None
    import sys

    if total == 0 or not sys.stderr.isatty():
        return lambda _text: None
    bar = tqdm(total=total, unit="shape", file=sys.stderr, leave=False)

    def step(text: str) -> None:
        bar.set_postfix_str(text[:60])
        bar.update(1)
        if bar.n >= total:
            bar.close()

    return step


def shape_line(result: ShapeResult, seconds: float, index: int | None = None, total: int | None = None) -> str:
    row = shape_summary(result)
    head = f"[{index}/{total}] " if index is not None else ""
    eff = "-" if row["efficiency"] is None else f"{row['efficiency']:.3f}"
    vs = "-" if row["vs_torch"] is None else f"{row['vs_torch']:.2f}"
    return (
        f"{head}{result.name} {result.M}x{result.N}x{result.K}: pick {result.model_pick or '-'} eff {eff}, "
        f"vs torch x{vs} ({len(result.configs)} configs, {seconds:.1f}s)"
    )


# ----------------------------------------------------------------------------------------------
# the summary (pure; used by the harness and the report page)
# ----------------------------------------------------------------------------------------------


def _geomean(values: Sequence[float]) -> float | None:
    positive = [v for v in values if v > 0 and math.isfinite(v)]
    return math.exp(sum(math.log(v) for v in positive) / len(positive)) if positive else None


def _percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile (numpy's default method), without numpy."""
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100.0
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def arithmetic_intensity(result: ShapeResult) -> float:
    """FLOP per byte of compulsory traffic (A and B read once, C written once)."""
    element = DTYPE_BYTES.get(result.dtype, 2)
    out = 4 if result.dtype in ("fp8e4m3", "fp8e5m2", "fp32", "tf32") else element
    traffic = result.batch * (element * (result.M * result.K + result.K * result.N) + out * result.M * result.N)
    return result.flops / traffic if traffic else 0.0


def shape_summary(result: ShapeResult) -> dict[str, Any]:
    """Per-shape figures: oracle best, pick time, efficiency (best/pick, <= 1), speed vs torch (torch/pick).

    Comparisons come from the final round (pick, best and torch.matmul timed side by side) where it holds
    them, else from the sweep; ``source`` says which the efficiency used."""
    final_best = result.final_best()
    best = final_best or result.best()
    pick_ms = result.configs.get(result.model_pick) if result.model_pick else None
    if result.model_pick and final_best is not None and finite_ms(result.final_ms.get(result.model_pick)):
        pick_ms = result.final_ms[result.model_pick]
    best_ms = best[1] if best else None
    efficiency, source = result.versus_best(result.model_pick)
    if result.model_pick and efficiency is None and result.best() is not None:
        efficiency = 0.0  # the pick failed to run (or gave a wrong result): the worst outcome
    vs_torch = result.torch_versus(result.model_pick) if result.model_pick else None
    best_vs_torch = result.torch_versus(None)
    predicted = result.model_predicted_ms.get(result.model_pick or "")
    peers: dict[str, float | None] = {}
    for peer, key in result.peer_picks.items():
        ratio, _ = result.versus_best(key)
        peers[peer] = ratio if ratio is not None else (0.0 if best_ms else None)
    return {
        "name": result.name,
        "shape": f"{result.M}x{result.N}x{result.K}",
        "intensity": arithmetic_intensity(result),
        "best_key": best[0] if best else None,
        "best_ms": best_ms,
        "pick_key": result.model_pick,
        "pick_ms": pick_ms,
        "predicted_ms": predicted,
        "efficiency": efficiency,
        "source": source,
        "vs_torch": vs_torch,
        "best_vs_torch": best_vs_torch,
        "torch_ms": result.final_ms.get(TORCH_KEY, result.torch_ms) if final_best else result.torch_ms,
        "peers": peers,
        "spearman": rank_correlation(result),
        "bottleneck": result.model_bottleneck,
    }


def rank_correlation(result: ShapeResult) -> float | None:
    """Spearman correlation of predicted and measured times over the configs that have both (>= 3)."""
    pairs = [
        (result.model_predicted_ms[k], ms)
        for k, ms in result.configs.items()
        if finite_ms(ms) and k in result.model_predicted_ms
    ]
    if len(pairs) < 3:
        return None
    from scipy.stats import spearmanr

    value = spearmanr([p for p, _ in pairs], [m for _, m in pairs]).statistic
    return None if value is None or not math.isfinite(float(value)) else float(value)


def summarize(results: Results, worst: int = 10) -> dict[str, Any]:
    """The summary figures of a validation (or bench) results file; every key present even when empty."""
    rows = [shape_summary(shape) for shape in results.shapes]
    effs = [r["efficiency"] for r in rows if r["efficiency"] is not None]
    vs = [r["vs_torch"] for r in rows if r["vs_torch"] is not None]
    best_vs = [r["best_vs_torch"] for r in rows if r["best_vs_torch"] is not None]
    sel = [s.selection_us for s in results.shapes if s.selection_us is not None]
    rho = [r["spearman"] for r in rows if r["spearman"] is not None]
    # how far the model's absolute time of its pick is from the pick's measured time (ranks need no absolute truth,
    # a person reading predicted_time_s does)
    absolute = [r["predicted_ms"] / r["pick_ms"] for r in rows if r["predicted_ms"] and r["pick_ms"]]
    auto = [s.autotune_wall_s for s in results.shapes if s.autotune_wall_s is not None]
    peers: dict[str, dict[str, Any]] = {}
    for peer in sorted({p for s in results.shapes for p in s.peer_picks}):
        values = [r["peers"][peer] for r in rows if r["peers"].get(peer) is not None]
        peers[peer] = {
            "shapes": len(values),
            "geomean": _geomean(values),
            "min": min(values) if values else None,
            "p5": _percentile(values, 5),
            "hit_rate": (sum(v >= 0.999999 for v in values) / len(values)) if values else None,
        }
    ranked = sorted((r for r in rows if r["efficiency"] is not None), key=lambda r: (r["efficiency"], r["name"]))
    errors = sum(1 for s in results.shapes for k in s.errors if not k.startswith("@"))
    wrong = sum(1 for s in results.shapes for e in s.errors.values() if e.startswith("wrong result"))
    return {
        "device": results.device,
        "shapes": len(results.shapes),
        "shapes_with_pick": sum(1 for s in results.shapes if s.model_pick),
        "final_round": sum(1 for r in rows if r["source"] == "final"),
        "configs_timed": sum(sum(1 for ms in s.configs.values() if finite_ms(ms)) for s in results.shapes),
        "config_errors": errors,
        "wrong_results": wrong,
        "pick_failed": sum(1 for r in rows if r["efficiency"] == 0.0),
        "efficiency": {
            "geomean": _geomean(effs),
            "p5": _percentile(effs, 5),
            "min": min(effs) if effs else None,
            "median": _percentile(effs, 50),
            "hit_rate": (sum(e >= 0.999999 for e in effs) / len(effs)) if effs else None,
            "within_5pct": (sum(e >= 0.95 for e in effs) / len(effs)) if effs else None,
        },
        "vs_torch": {"geomean": _geomean(vs), "min": min(vs) if vs else None, "max": max(vs) if vs else None},
        "best_vs_torch": {"geomean": _geomean(best_vs), "min": min(best_vs) if best_vs else None},
        "selection_us": {
            "median": _percentile(sel, 50),
            "p95": _percentile(sel, 95),
            "max": max(sel) if sel else None,
        },
        "spearman": {
            "median": _percentile(rho, 50),
            "mean": statistics.fmean(rho) if rho else None,
            "min": min(rho) if rho else None,
        },
        "absolute": {q: _percentile(absolute, p) for q, p in (("p10", 10), ("median", 50), ("p90", 90))},
        "autotune_s": {"mean": statistics.fmean(auto) if auto else None, "total": sum(auto) if auto else None},
        "peers": peers,
        "worst": [
            {
                k: r[k]
                for k in ("name", "shape", "efficiency", "pick_key", "pick_ms", "best_key", "best_ms", "bottleneck")
            }
            for r in ranked[:worst]
        ],
        "rows": rows,
    }


def _num(value: float | None, spec: str = ".3f") -> str:
    return "-" if value is None else format(value, spec)


def summary_lines(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """(figure, value) pairs for the terminal and the report page."""
    e, v, s = summary["efficiency"], summary["vs_torch"], summary["selection_us"]
    rho = summary["spearman"]
    lines = [
        ("shapes (with a model pick)", f"{summary['shapes']} ({summary['shapes_with_pick']})"),
        ("picks scored on the side-by-side final round", f"{summary['final_round']}"),
        ("selection efficiency geomean / p5 / min", f"{_num(e['geomean'])} / {_num(e['p5'])} / {_num(e['min'])}"),
        (
            "picks that are the oracle's best / within 5%",
            _num(e["hit_rate"], ".1%") + " / " + _num(e["within_5pct"], ".1%"),
        ),
        ("ours (model pick) vs torch.matmul geomean / min", f"x{_num(v['geomean'])} / x{_num(v['min'])}"),
        (
            "oracle best vs torch.matmul geomean / min",
            f"x{_num(summary['best_vs_torch']['geomean'])} / x{_num(summary['best_vs_torch']['min'])}",
        ),
        ("selection time median / p95 / max (us)", " / ".join(_num(s[q], ".0f") for q in ("median", "p95", "max"))),
        (
            "predicted-vs-measured Spearman median / mean / min",
            " / ".join(_num(rho[q]) for q in ("median", "mean", "min")),
        ),
        (
            "pick's predicted / measured time median / p10 / p90",
            " / ".join(_num(summary["absolute"][q], ".2f") for q in ("median", "p10", "p90")),
        ),
        (
            "autotune wall time mean / total (s)",
            f"{_num(summary['autotune_s']['mean'], '.2f')} / {_num(summary['autotune_s']['total'], '.1f')}",
        ),
        (
            "configs timed / failed / wrong results",
            f"{summary['configs_timed']} / {summary['config_errors']} / {summary['wrong_results']}",
        ),
    ]
    for peer, stats in summary["peers"].items():
        lines.append(
            (
                f"peer {peer}: efficiency geomean / p5 / min",
                f"{_num(stats['geomean'])} / {_num(stats['p5'])} / {_num(stats['min'])}",
            )
        )
    return lines


def print_summary(results: Results, stream: Any = None) -> dict[str, Any]:
    """Terminal summary table and the worst shapes; returns the summary dict."""
    import sys

    from rich.console import Console
    from rich.table import Table

    summary = summarize(results)
    console = Console(file=stream or sys.stdout, width=160)
    table = Table(title=f"validation summary: {results.device} {results.settings.get('suite', '')}")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for name, value in summary_lines(summary):
        table.add_row(name, value)
    console.print(table)
    if summary["worst"]:
        worst = Table(title="worst picks")
        for column in ("shape", "MxNxK", "efficiency", "model pick", "pick ms", "oracle best", "best ms", "bottleneck"):
            worst.add_column(column)
        for row in summary["worst"]:
            worst.add_row(
                row["name"],
                row["shape"],
                _num(row["efficiency"]),
                str(row["pick_key"]),
                _num(row["pick_ms"], ".4f"),
                str(row["best_key"]),
                _num(row["best_ms"], ".4f"),
                str(row["bottleneck"] or "-"),
            )
        console.print(worst)
    return summary


# ----------------------------------------------------------------------------------------------
# the GPU side (lazy: torch/triton only when a sweep really runs)
# ----------------------------------------------------------------------------------------------


def gpu_measure(settings: ValidateSettings, limits: KernelLimits, profile: Any, log: Callable[[str], None]) -> Measure:
    """kernels.benchmark.bench_shape for exactly the given configs (same inputs, torch side by side)."""
    from theodolite.kernels import benchmark

    timer = benchmark.Timer(settings.rep_ms, settings.max_reps)

    def measure(shape: Shape, configs: list[GemmConfig]) -> ShapeResult:
        bench = benchmark.BenchSettings(
            dtype=shape.dtype,
            layout=shape.layout,
            config_keys=tuple(c.key for c in configs),
            rep_ms=settings.rep_ms,
            max_reps=settings.max_reps,
            precompile=False,
        )
        return benchmark.bench_shape(shape.name, shape.m, shape.n, shape.k, bench, limits, timer, profile, log)

    return measure


def gpu_final(settings: ValidateSettings) -> Final:
    """kernels.benchmark.final_round on the shape's inputs (the sweep's seed, so the same data)."""
    from theodolite.kernels import benchmark

    timer = benchmark.Timer(settings.rep_ms, settings.max_reps)

    def final(shape: Shape, keys: list[str]) -> tuple[dict[str, float], dict[str, str]]:
        bench = benchmark.BenchSettings(dtype=shape.dtype, layout=shape.layout, precompile=False)
        return benchmark.final_round(shape.m, shape.n, shape.k, keys, bench, timer)

    return final


def gpu_autotune(warmup_ms: int = 25, rep_ms: int = 100) -> Autotune:
    """Triton's autotune procedure over the same space: do_bench(warmup=25, rep=100) per config, fastest median.

    This is what ``triton.autotune`` runs on a cache miss (``Autotuner._bench``: ``do_bench`` with its
    defaults and quantiles (0.5, 0.2, 0.8), the median decides); our launches go through ``plan_gemm``
    instead of a decorated kernel, and compiles are cached beforehand, so the wall time is the tuning
    cost alone.
    """

    def autotune(shape: Shape, configs: list[GemmConfig]) -> tuple[str | None, float]:
        import torch
        from triton.testing import do_bench

        from theodolite.kernels.benchmark import make_inputs
        from theodolite.kernels.launch import plan_gemm

        a, b = make_inputs(shape.m, shape.n, shape.k, shape.dtype, shape.layout, torch.device("cuda"), seed=12345)
        start = time.perf_counter()
        best: tuple[float, str] | None = None
        for config in configs:
            try:
                plan = plan_gemm(a, b, config, precision="ieee" if shape.dtype == "fp32" else None)
                ms = float(do_bench(plan.run, warmup=warmup_ms, rep=rep_ms, quantiles=(0.5, 0.2, 0.8))[0])
            except Exception:
                continue
            if best is None or ms < best[0]:
                best = (ms, config.key)
        torch.cuda.synchronize()
        return (best[1] if best else None), time.perf_counter() - start

    return autotune


def precompile_all(
    shapes: Sequence[Shape], settings: ValidateSettings, limits: KernelLimits, profile: Any, log: Callable[[str], None]
) -> float:
    """Compile every config any shape needs once, in parallel processes (kernels.build.precompile)."""
    pairs = [
        (config, shape.problem)
        for shape in shapes
        for config in legal_configs(shape.problem, limits, profile, settings.variants)
    ]
    return _precompile_pairs(pairs, settings.workers, log)


def _precompile_pairs(pairs: Sequence[tuple[GemmConfig, Problem]], workers: int, log: Callable[[str], None]) -> float:
    """Compile each (config, specialization) of ``pairs`` once, in parallel processes; seconds taken."""
    import os

    from theodolite.kernels.build import precompile, specialization

    # One compile per (config, specialization): sizes and strides are not specialized, so the
    # smallest problem of each specialization class stands for all of them.
    smallest: dict[tuple[str, tuple[bool, ...]], tuple[float, GemmConfig, Any]] = {}
    for config, problem in pairs:
        if problem.m * problem.n * problem.k == 0:
            continue
        spec = specialization(problem)
        known = smallest.get((config.key, spec))
        if known is None or problem.flops < known[0]:
            smallest[(config.key, spec)] = (problem.flops, config, problem)
    start = time.perf_counter()
    workers = workers or max(1, min(16, (os.cpu_count() or 2) - 1))
    for error in precompile([(config, problem) for _, config, problem in smallest.values()], workers=workers):
        log(f"  precompile: {error}")
    seconds = time.perf_counter() - start
    log(f"precompiled {len(smallest)} (config, specialization) pairs in {seconds:.1f}s ({workers} processes)")
    return seconds


def final_on_file(
    source: str | Path,
    output: str | Path,
    settings: ValidateSettings,
    command: str = "",
    log: Callable[[str], None] = print,
) -> Results:
    """The GPU entry point behind ``validate --final FILE``: add the final round to a results file
    (``--resume``: continue an interrupted one in ``output``)."""
    import torch

    from theodolite.errors import NoDeviceError

    results = load_results(output if settings.resume and Path(output).is_file() else source)
    if not torch.cuda.is_available():
        raise NoDeviceError("--final needs a GPU (torch.cuda.is_available() is False); it times kernels")
    device = torch.cuda.get_device_name()
    if results.device and results.device != device:
        raise ValidationError(f"{source} was measured on {results.device}; this is {device}: time it there")
    pairs = [
        (GemmConfig.from_key(key), Problem(s.M, s.N, s.K, dtype=s.dtype, batch=s.batch, layout=s.layout))
        for s in results.shapes
        for key in final_candidates(s)
    ]
    if settings.precompile:
        _precompile_pairs(pairs, settings.workers, log)
    start = time.monotonic()
    add_final_round(
        results, gpu_final(settings), log, save=lambda: save_results(results, output), redo=not settings.resume
    )
    results.settings["final_round"] = {
        "shapes": sum(1 for shape in results.shapes if shape.final_ms),
        "wall_s": round(time.monotonic() - start, 1),
        "command": command,
        "added": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    save_results(results, output)
    return results


def validate(
    shape_spec: str,
    settings: ValidateSettings,
    output: str | Path,
    profile_path: str | None = None,
    command: str = "",
    log: Callable[[str], None] = print,
) -> Results:
    """The GPU entry point behind ``python -m theodolite validate``."""
    import torch

    from theodolite.errors import NoDeviceError

    for peer in settings.peers:
        if peer not in PEERS:
            raise ValidationError(f"unknown peer {peer!r}; expected some of {', '.join(PEERS)}")
    shapes = load_shapes(shape_spec, settings.dtype, settings.layout)
    if not torch.cuda.is_available():
        raise NoDeviceError("validate needs a GPU (torch.cuda.is_available() is False); it times kernels")
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        profile = load_validation_profile(profile_path)
    for warning in caught:
        log(f"warning: {warning.message}")
    device = torch.cuda.get_device_name()
    if torch.version.hip is None and not profile.provenance.architecture.startswith("sm_"):
        raise ValidationError(
            f"profile {profile.origin} is for {profile.provenance.architecture} ({profile.device_name}), this is "
            f"{device}: pass --profile with this device's profile or run `theodolite calibrate`"
        )
    limits = KernelLimits.from_profile(profile)
    nvmmh = None
    if "nvmmh" in settings.peers:
        try:
            nvmmh = NvmmhPeer(device)
        except ValidationError as error:
            log(
                f"warning: {error}; nvmmh picks skipped here: add them on a machine that has the package with "
                f"`theodolite validate --add-peers {output}` (every legal config is timed, so no GPU is needed)"
            )
    harness = Harness(
        profile=profile,
        limits=limits,
        measure=gpu_measure(settings, limits, profile, log),
        nvmmh=nvmmh,
        autotune=gpu_autotune() if "autotune" in settings.peers else None,
        final=gpu_final(settings) if settings.final else None,
        log=log,
    )
    started = time.monotonic()
    mine = shard_of(shapes, *settings.shard)
    if settings.resume and Path(output).is_file():
        done = {result_key(s) for s in load_results(output).shapes}
        mine = [s for s in mine if s.key not in done]
    precompile_s = precompile_all(mine, settings, limits, profile, log) if settings.precompile and mine else 0.0
    import triton

    from theodolite import __version__

    versions = {
        "torch_version": torch.__version__,
        "triton_version": triton.__version__,
        "theodolite_version": __version__,
    }
    results = run_validation(
        shapes, settings, harness, output, device=device, command=command, started=started, versions=versions
    )
    results.settings["precompile_s"] = round(precompile_s, 1) + float(results.settings.get("precompile_s", 0.0))
    if caught:
        results.settings["profile_warnings"] = [str(w.message) for w in caught]
    if nvmmh is not None:
        results.settings["nvmmh_gpu"] = nvmmh.gpu_name or "present device"
    save_results(results, output)
    return results


# ----------------------------------------------------------------------------------------------
# dry run (CPU): what a sweep would time, and roughly how long it takes
# ----------------------------------------------------------------------------------------------

FLUSH_MS = 0.12  # L2 flush (256 MB memset) before every timed run, plus launch gaps
CONFIG_OVERHEAD_MS = 6.0  # plan, NaN fill, checked run, error check, sync per config


def estimate_shape_s(
    predicted_ms: Sequence[float], rep_ms: float = 8.0, max_reps: int = 50, min_reps: int = 3
) -> float:
    """Rough wall seconds to time one shape: per config, min_reps runs, then up to rep_ms of runs (capped)."""
    total = 0.0
    for ms in predicted_ms:
        reps = max(min_reps, min(max_reps, int(rep_ms / max(ms, 1e-3))))
        total += reps * (ms + FLUSH_MS) + CONFIG_OVERHEAD_MS + ms
    return total / 1e3


def dry_run(
    shapes: Sequence[Shape], settings: ValidateSettings, profile: Any, nvmmh: Any = None
) -> list[dict[str, Any]]:
    """Per shape of this shard: legal configs, the model's and peers' picks, an estimate of the timing cost."""
    limits = KernelLimits.from_profile(profile)
    rows = []
    for shape in shard_of(shapes, *settings.shard):
        problem = shape.problem
        legal = legal_configs(problem, limits, profile, settings.variants)
        chosen = model_pick(problem, profile, repeats=1)
        predicted = [chosen.predicted_ms.get(c.key, 0.05) for c in legal] or [0.05]
        picks = {"model": chosen.key or f"- ({chosen.error})"}
        if "fixed" in settings.peers:
            fixed = fixed_pick(problem, legal)
            picks["fixed"] = fixed.key if fixed else "-"
        if nvmmh is not None:
            try:
                nv = nvmmh.pick(problem, legal)
                picks["nvmmh"] = nv.key if nv else "-"
            except Exception as error:
                picks["nvmmh"] = f"- ({type(error).__name__})"
        seconds = estimate_shape_s(predicted, settings.rep_ms, settings.max_reps)
        if "autotune" in settings.peers:
            seconds += len(legal) * 0.13  # do_bench warmup 25 ms + rep 100 ms per config
        rows.append({"shape": shape, "legal": len(legal), "picks": picks, "estimate_s": seconds})
    return rows
