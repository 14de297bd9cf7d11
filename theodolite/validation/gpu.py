"""The GPU side of a validation: the entry points behind ``theodolite validate`` and ``validate --final``.

``validate`` builds the real ``Harness`` (kernels.benchmark's timer, the model, the peers, Triton's autotune
procedure) and runs the sweep; ``final_on_file`` adds the final round to an existing results file.  torch and
Triton are imported only when a sweep really runs.  ``gpu_measure``, ``gpu_final``, ``gpu_floors``, ``gpu_autotune``,
``precompile_all``, ``_precompile_pairs`` and ``NvmmhPeer`` are looked up on the ``theodolite.validation``
package at the call, so a test that replaces one there (a fake GPU) reaches these entry points.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from theodolite.kernels.config import GemmConfig, KernelLimits, Problem, legal_configs
from theodolite.results import Results, ShapeResult, load_results, save_results
from theodolite.validation.final import Final, add_final_round, final_candidates
from theodolite.validation.peers import PEERS
from theodolite.validation.shapes import Shape, ValidateSettings, ValidationError, load_shapes, result_key, shard_of
from theodolite.validation.sweep import Autotune, Harness, Measure, run_validation


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


def gpu_floors(settings: ValidateSettings) -> Callable[[], dict[str, float]]:
    """kernels.benchmark.timing_floors with the sweep's timer settings."""

    def floors() -> dict[str, float]:
        from theodolite.kernels import benchmark

        return benchmark.timing_floors(benchmark.Timer(settings.rep_ms, settings.max_reps))

    return floors


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
    (``--resume``: continue an interrupted one in ``output``; ``--shard i/n``: only every n-th shape from i goes to
    ``output``, so several GPUs share a final round and ``--merge`` joins their files)."""
    import torch

    from theodolite import validation as package  # the package's names: what tests may replace
    from theodolite.errors import NoDeviceError

    results = load_results(output if settings.resume and Path(output).is_file() else source)
    index, count = settings.shard
    if count > 1 and results.settings.get("final_shard") != f"{index}/{count}":
        results.shapes = list(shard_of(results.shapes, index, count))
        results.settings["final_shard"] = f"{index}/{count}"
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
        package._precompile_pairs(pairs, settings.workers, log)
    start = time.monotonic()
    add_final_round(
        results, package.gpu_final(settings), log, save=lambda: save_results(results, output), redo=not settings.resume
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

    from theodolite import validation as package  # the package's names: what tests may replace
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
            nvmmh = package.NvmmhPeer(device)
        except ValidationError as error:
            log(
                f"warning: {error}; nvmmh picks skipped here: add them on a machine that has the package with "
                f"`theodolite validate --add-peers {output}` (every legal config is timed, so no GPU is needed)"
            )
    harness = Harness(
        profile=profile,
        limits=limits,
        measure=package.gpu_measure(settings, limits, profile, log),
        nvmmh=nvmmh,
        autotune=package.gpu_autotune() if "autotune" in settings.peers else None,
        final=package.gpu_final(settings) if settings.final else None,
        log=log,
        floors=package.gpu_floors(settings),
    )
    started = time.monotonic()
    mine = shard_of(shapes, *settings.shard)
    if settings.resume and Path(output).is_file():
        done = {result_key(s) for s in load_results(output).shapes}
        mine = [s for s in mine if s.key not in done]
    precompile_s = package.precompile_all(mine, settings, limits, profile, log) if settings.precompile and mine else 0.0
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
