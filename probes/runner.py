"""Runs every probe in order on one GPU and assembles a Profile (nothing is written here).

Order matters: topology first (SM count, L2 size), then the clock (its matrix-load train warms
the card, so the rest runs warm, and the max clock converts differential latencies to cycles),
then matrix, shared memory, L2, HBM and launch.  A probe that raises is recorded in
``Profile.unsupported`` under its metrics with the reason, and the rest continue; the required
metrics it would have written then make the profile invalid, which the caller reports.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import socket
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from theodolite.probes import guard
from theodolite.probes.common import ProbeContext, ProbeResult

from theodolite.errors import NoDeviceError, ProfileError
from theodolite.profile.schema import KernelBuild, Profile, Provenance

# (probe name, module, metrics it writes) in run order
PROBES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("topology", "theodolite.probes.topology", ("sm_count", "l2_bytes", "smem_bytes_per_block", "regs_per_sm")),
    ("clock", "theodolite.probes.clock", ("clock_max_hz", "clock_sustained_matrix_hz", "clock_ramp_s")),
    ("matrix", "theodolite.probes.matrix", ("mma_throughput_fp16", "mma_throughput_bf16", "fma_throughput_fp32")),
    ("smem", "theodolite.probes.smem", ("smem_bandwidth_per_sm", "smem_latency")),
    ("l2", "theodolite.probes.l2", ("l2_bandwidth", "l2_effective_bytes", "l2_latency_near", "l2_latency_far")),
    (
        "hbm",
        "theodolite.probes.hbm",
        ("hbm_read_bandwidth", "hbm_write_bandwidth", "hbm_copy_bandwidth", "hbm_tile_write_bandwidth"),
    ),
    (
        "launch",
        "theodolite.probes.launch",
        ("launch_overhead", "launch_overhead_graph", "launch_roundtrip", "program_start_cost"),
    ),
)

# Spread limits (CV) per probe and metric: a probe whose metric comes back over its limit is measured again
# (probes/guard.py, at most guard.MAX_ATTEMPTS runs).  Set from the bundled H100/H200 profiles' CVs (bandwidths
# and throughputs under 1%, hbm_read_bandwidth_one_sm 3.5-4%, launch_overhead 5-16%) with room, so a quiet card
# runs each probe once while a disturbed one (hbm_read_bandwidth_one_sm at CV 72% while another process compiled
# on the host) is caught.  Metrics not named here (driver counts, single-sample figures) never trigger a re-run.
SPREAD_LIMITS: dict[str, dict[str, float]] = {
    "topology": {},
    "clock": {"clock_max_hz": 0.02, "clock_sustained_matrix_hz": 0.06},  # probes/clock.py: the swing under load
    "matrix": {
        "mma_throughput_fp16": 0.05,
        "mma_throughput_bf16": 0.05,
        "mma_throughput_tf32": 0.05,
        "mma_throughput_fp8e4m3": 0.05,
        "mma_throughput_fp8e5m2": 0.05,
        "fma_throughput_fp32": 0.05,
    },
    "smem": {"smem_bandwidth_per_sm": 0.05, "smem_latency": 0.05},
    "l2": {"l2_bandwidth": 0.05, "l2_latency_near": 0.05, "l2_latency_far": 0.05},
    "hbm": {
        "hbm_read_bandwidth": 0.05,
        "hbm_write_bandwidth": 0.05,
        "hbm_copy_bandwidth": 0.05,
        "hbm_tile_write_bandwidth": 0.05,
        "hbm_read_bandwidth_one_sm": 0.12,
        # the 90% point fitted on each sweep: a spread over the 5% a node bar allows between two calibrations
        "hbm_saturation_sms": 0.05,
        "hbm_latency": 0.05,
    },
    # launch_overhead and launch_roundtrip measure the host as much as the card: loose limits
    "launch": {
        "launch_overhead": 0.40,
        "launch_roundtrip": 0.25,
        "launch_overhead_graph": 0.05,
        "program_start_cost": 0.10,
    },
}


@dataclass
class RunOutcome:
    """Everything a calibration produced: the profile plus the independent figures and timings."""

    profile: Profile
    references: dict[str, float] = field(default_factory=dict)
    diagnostics: dict[str, Any] = field(default_factory=dict)
    probe_seconds: dict[str, float] = field(default_factory=dict)


def require_device(device: int) -> None:
    """NoDeviceError (one clear line) when torch sees no GPU or not this index."""
    try:
        import torch
    except ImportError as error:  # pragma: no cover - torch is a dependency
        raise NoDeviceError(f"torch is not importable ({error}); calibration needs a GPU") from None
    if not torch.cuda.is_available():
        raise NoDeviceError("no GPU visible to torch (torch.cuda.is_available() is False); calibrate needs one")
    count = torch.cuda.device_count()
    if not 0 <= device < count:
        raise NoDeviceError(f"device {device} does not exist: torch sees {count} GPU(s) (0..{count - 1})")


def provenance(device: int, notes: str = "") -> Provenance:
    import torch
    import triton

    from theodolite import __version__

    props = torch.cuda.get_device_properties(device)
    hip = getattr(torch.version, "hip", None)
    if hip:
        arch = str(getattr(props, "gcnArchName", "gfx")).split(":")[0]
        vendor, runtime = "AMD", f"ROCm {hip}"
    else:
        arch = f"sm_{props.major}{props.minor}"
        vendor, runtime = "NVIDIA", f"CUDA {torch.version.cuda}"
    driver = ""
    try:
        import pynvml

        pynvml.nvmlInit()
        value = pynvml.nvmlSystemGetDriverVersion()
        driver = value.decode() if isinstance(value, bytes) else str(value)
    except Exception:  # pynvml is optional
        driver = ""
    return Provenance(
        device_name=torch.cuda.get_device_name(device),
        vendor=vendor,
        architecture=arch,
        source="measured",
        created_utc=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        theodolite_version=__version__,
        driver=driver,
        runtime=runtime,
        torch_version=torch.__version__,
        triton_version=triton.__version__,
        host=socket.gethostname() or platform.node(),
        notes=notes,
    )


_BUILD_MARKER = "@@THEODOLITE_BUILDS@@"
_BUILD_SCRIPT = (
    "import dataclasses, json, sys\n"
    "from theodolite.kernels.build import BUILD_MATRIX, compile_builds\n"
    "builds = compile_builds(tuple(BUILD_MATRIX), architecture=sys.argv[1])\n"
    f"print({_BUILD_MARKER!r} + json.dumps([dataclasses.asdict(b) for b in builds]))\n"
)


def _compile_in_subprocess(architecture: str, timeout_s: float) -> list[KernelBuild]:
    """compile_builds in a fresh Python process: no fork after CUDA init, and a time limit."""
    completed = subprocess.run(
        [sys.executable, "-c", _BUILD_SCRIPT, architecture],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    for line in reversed(completed.stdout.splitlines()):
        if line.startswith(_BUILD_MARKER):
            return [KernelBuild(**row) for row in json.loads(line[len(_BUILD_MARKER) :])]
    tail = (completed.stderr or completed.stdout).strip().splitlines()[-1:] or ["no output"]
    raise RuntimeError(f"compile_builds exited {completed.returncode}: {tail[0][:200]}")


def reusable_builds(architecture: str, key: str) -> tuple[tuple[KernelBuild, ...], str] | None:
    """Builds another profile already holds for this architecture from the same Triton version, kernel sources and
    build matrix (``Provenance.kernel_source`` equal to ``key``): the bundled profiles, then the user's cache.  Compiler
    facts depend on those alone, not on the card, so a calibration need not compile them again."""
    from pathlib import Path

    from theodolite.profile.hdf5 import load_profile
    from theodolite.profile.resolve import user_cache_dir

    bundled = Path(__file__).resolve().parent.parent / "profiles"
    for folder in (bundled, user_cache_dir()):
        for path in sorted(folder.glob("*.h5")) if folder.is_dir() else ():
            try:
                profile = load_profile(path)
            except Exception:  # an unreadable file is not ours to judge here
                continue
            if profile.provenance.architecture == architecture and profile.provenance.kernel_source == key:
                builds = tuple(b for b in profile.kernel_builds if b.architecture == architecture)
                if builds:
                    return builds, f"{len(builds)} kernel builds reused from {path.name} (kernel source {key})"
    return None


def kernel_builds(
    architecture: str, log: Callable[[str], None], timeout_s: float = 3600.0
) -> tuple[tuple[KernelBuild, ...], str]:
    """Compiler facts of the GEMM configs for every dtype the API accepts (``kernels.build.BUILD_MATRIX``, ~5,500
    compiles: 3,600 took about 3 minutes on 16 cores), reused from a profile of the same architecture and kernel
    sources where one exists (``reusable_builds``); never fatal."""
    try:
        from theodolite.kernels.build import kernel_source_key
    except (ImportError, AttributeError) as error:
        return (), f"kernel builds skipped: {error}"
    key = kernel_source_key()
    reused = reusable_builds(architecture, key)
    if reused is not None:
        log(reused[1])
        return reused
    try:
        builds = _compile_in_subprocess(architecture, timeout_s)
    except Exception as error:  # the kernels area is not calibration's to break
        return (), f"kernel builds skipped: compile_builds failed: {type(error).__name__}: {str(error)[:200]}"
    return tuple(builds), f"{len(builds)} kernel builds (kernel source {key})"


def collect(
    device: int = 0,
    *,
    quick: bool = False,
    only: tuple[str, ...] | None = None,
    on_probe: Callable[[str, int, int], None] | None = None,
    log: Callable[[str], None] = print,
    attempts: int = guard.MAX_ATTEMPTS,
) -> tuple[ProbeResult, dict[str, float]]:
    """Run the probes and return their merged results and seconds per probe (no Profile yet).

    Each probe is guarded (probes/guard.py): one over its SPREAD_LIMITS runs again, up to ``attempts`` runs
    in all; what the guard did is listed in ``diagnostics["spread_guard"]`` (one line per re-measured probe).
    """
    import importlib

    import torch

    require_device(device)
    torch.cuda.set_device(device)
    ctx = ProbeContext(device=device, quick=quick, log=log)
    total = ProbeResult()
    seconds: dict[str, float] = {}
    notes: list[str] = []
    chosen = [p for p in PROBES if only is None or p[0] in only or p[0] == "topology"]
    for index, (name, module_name, writes) in enumerate(chosen):
        if on_probe:
            on_probe(name, index, len(chosen))
        begin = time.perf_counter()
        try:
            module = importlib.import_module(module_name)
            part, record = guard.guarded(
                name, lambda module=module: module.run(ctx), SPREAD_LIMITS.get(name, {}), attempts=attempts, log=log
            )
            if record is not None:
                notes.append(record.note())
        except KeyboardInterrupt:
            raise
        except Exception as error:
            reason = f"probe {name} failed: {type(error).__name__}: {str(error)[:300]}"
            log(reason)
            if os.environ.get("THEODOLITE_PROBE_DEBUG"):
                log(traceback.format_exc())
            part = ProbeResult(unsupported={metric: reason for metric in writes})
            if name == "topology":
                raise
        seconds[name] = time.perf_counter() - begin
        total.merge(part)
        torch.cuda.empty_cache()
    for metric in total.metrics:
        total.unsupported.pop(metric, None)
    total.diagnostics["spread_guard"] = notes
    return total, seconds


def guard_note(lines: list[str]) -> str:
    """The provenance line of the spread guard: which probes were re-measured, or that none was."""
    if not lines:
        return "spread guard: every probe within its limits on the first attempt"
    return "spread guard: " + "; ".join(lines)


def run_probes(
    device: int = 0,
    *,
    quick: bool = False,
    only: tuple[str, ...] | None = None,
    on_probe: Callable[[str, int, int], None] | None = None,
    log: Callable[[str], None] = print,
    with_builds: bool = True,
) -> RunOutcome:
    """Run the probes on ``device`` and return the validated Profile with the reference figures."""
    total, seconds = collect(device, quick=quick, only=only, on_probe=on_probe, log=log)
    prov = provenance(device)
    builds: tuple[KernelBuild, ...] = ()
    notes = []
    if with_builds:
        if on_probe:
            on_probe("kernel builds (compiling GEMM configs)", len(PROBES), len(PROBES) + 1)
        begin = time.perf_counter()
        builds, note = kernel_builds(prov.architecture, log)
        seconds["kernel_builds"] = time.perf_counter() - begin
        notes.append(note)
    if quick:
        notes.append("quick run")
    notes.append(guard_note(total.diagnostics.get("spread_guard", [])))
    source = ""
    if builds:
        from theodolite.kernels.build import kernel_source_key

        source = kernel_source_key()
    prov = Provenance(**{**prov.__dict__, "notes": "; ".join(notes), "kernel_source": source})
    try:
        profile = Profile(
            provenance=prov,
            metrics=total.metrics,
            curves=total.curves,
            unsupported=total.unsupported,
            kernel_builds=builds,
        )
    except ProfileError as error:
        failures = "; ".join(sorted(set(total.unsupported.values())))[:600]
        failure = ProfileError(f"calibration did not produce a valid profile: {error} ({failures})")
        failure.partial = total  # type: ignore[attr-defined]  # for --diagnostics
        raise failure from None
    return RunOutcome(
        profile=profile, references=total.references, diagnostics=total.diagnostics, probe_seconds=seconds
    )
