"""``theodolite calibrate``: measure this GPU into a hardware profile.

Runs every probe (theodolite.probes.runner) with a progress bar, writes the profile atomically
(``save_profile``: a temporary file renamed into place, so Ctrl-C leaves no partial file) and
prints a summary table with the independent reference figures of the same run beside the
measured values.  ``--all-devices`` starts one process per visible GPU, one profile each; the
kernel builds (minutes of host compiling on every core) are compiled first, once per architecture,
and merged into every card's profile, so no compile runs while a GPU is being timed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from theodolite.errors import NoDeviceError, ProfileError

SUMMARY = (
    "sm_count",
    "clock_max_hz",
    "clock_sustained_matrix_hz",
    "mma_throughput_bf16",
    "mma_throughput_fp16",
    "mma_throughput_tf32",
    "mma_throughput_fp8e4m3",
    "mma_throughput_fp8e5m2",
    "fma_throughput_fp32",
    "mma_latency_bf16",
    "smem_bandwidth_per_sm",
    "smem_latency",
    "l2_bandwidth",
    "l2_effective_bytes",
    "l2_latency_near",
    "l2_latency_far",
    "hbm_read_bandwidth",
    "hbm_write_bandwidth",
    "hbm_copy_bandwidth",
    "hbm_saturation_sms",
    "hbm_latency",
    "launch_overhead",
    "launch_overhead_graph",
    "launch_roundtrip",
    "program_start_cost",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", type=int, default=0, help="GPU index (default 0)")
    parser.add_argument(
        "--all-devices",
        action="store_true",
        help="calibrate every visible GPU, one process each (kernel builds compiled first, once per architecture)",
    )
    parser.add_argument(
        "--sequential", action="store_true", help="with --all-devices: one GPU at a time instead of all at once"
    )
    parser.add_argument("--quick", action="store_true", help="fewer points and shorter runs (< 45 s)")
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        default=None,
        help="profile file (with --all-devices: a folder); default: the user cache folder",
    )
    parser.add_argument("--force", action="store_true", help="replace an existing profile")
    parser.add_argument("--no-builds", action="store_true", help="skip compiling the GEMM configs' kernel builds")
    parser.add_argument("--diagnostics", type=Path, default=None, help="also write the probes' diagnostics (JSON)")
    parser.add_argument("--no-model", action="store_true", help="skip the model stage (its parameters keep defaults)")
    parser.add_argument(
        "--model-only", type=Path, default=None, metavar="PROFILE",
        help="run only the model stage on this GPU's existing profile (written to -o, else replacing it with --force)",
    )  # fmt: skip
    parser.add_argument(
        "--exclude-suite", action="append", default=[], metavar="SUITE",
        help="a report suite the model stage's calibration shapes must avoid (llm and random-dev always are)",
    )  # fmt: skip


def device_count() -> int:
    try:
        import torch
    except ImportError:  # pragma: no cover
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def default_path(device_name: str) -> Path:
    from theodolite.profile.resolve import slug, user_cache_dir

    return user_cache_dir() / f"{slug(device_name)}.h5"


def run_probes(device: int, quick: bool, with_builds: bool, progress: Any):
    """Indirection so tests can swap the GPU run for a fake one."""
    from theodolite.probes.runner import run_probes as runner

    return runner(device, quick=quick, on_probe=progress, with_builds=with_builds)


def run_model_stage(profile: Any, quick: bool, progress: Any, exclude: Any = ()) -> tuple[Any, dict[str, float]]:
    """Indirection so tests can swap the GPU model stage for a fake one."""
    from theodolite.probes.model_stage import for_calibrate

    return for_calibrate(profile, quick, progress, exclude=exclude)


def _model_only(args: argparse.Namespace) -> int:
    """The model stage alone on an existing profile of this GPU (saves the probes' time)."""
    from theodolite.probes.model_stage import show
    from theodolite.probes.runner import require_device
    from theodolite.profile import load_profile, save_profile

    require_device(args.device)
    import torch

    profile = load_profile(args.model_only)
    here = torch.cuda.get_device_name(args.device)
    if profile.device_name != here:
        raise ProfileError(f"{args.model_only}: a profile of {profile.device_name}, but device {args.device} is {here}")
    path = args.output if args.output is not None else args.model_only
    _check_target(path, args.force)
    from rich.progress import Progress

    with Progress(transient=False) as progress:
        task = progress.add_task("model stage", total=None)
        updated, seconds = run_model_stage(profile, args.quick, lambda text, i, n: progress.update(
            task, total=n, completed=i, description=text), args.exclude_suite)  # fmt: skip
    save_profile(updated, path, overwrite=True)
    print(show(updated))
    print("; ".join(f"{name} {value:.1f}s" for name, value in seconds.items()) + f" -> {path}")
    return 0


def _check_target(path: Path, force: bool) -> None:
    if path.exists() and not force:
        raise ProfileError(f"{path}: file exists (pass --force to replace it)")


def _summary(outcome: Any, path: Path, wall: float) -> None:
    from rich.console import Console
    from rich.table import Table

    from theodolite.units import format_quantity

    profile = outcome.profile
    refs = outcome.references
    reference_of = {
        "sm_count": ("driver", refs.get("sm_count_driver"), "1"),
        "l2_effective_bytes": ("driver L2", refs.get("l2_bytes_driver"), "B"),
        "mma_throughput_bf16": ("torch.matmul best", refs.get("torch_matmul_bf16_flops"), "FLOP/s"),
        "hbm_copy_bandwidth": ("torch copy_", refs.get("torch_copy_bandwidth"), "B/s"),
    }
    table = Table(title=f"{profile.device_name} ({profile.provenance.architecture}) -> {path}")
    for column in ("metric", "value", "CV", "reference", "ratio", "flag"):
        table.add_column(column)
    for name in SUMMARY:
        if name not in profile.metrics:
            if name in profile.unsupported:
                table.add_row(name, "unsupported", "", profile.unsupported[name][:60], "", "")
            continue
        m = profile.metrics[name]
        ref_text, ratio = "", ""
        if name in reference_of and reference_of[name][1]:
            label, value, unit = reference_of[name]
            ref_text = f"{label} {format_quantity(value, unit, 4)}"
            ratio = f"{m.value / value:.3f}"
        cv = "" if m.cv != m.cv else f"{100 * m.cv:.1f}%"
        table.add_row(name, format_quantity(m.value, m.unit, 4), cv, ref_text, ratio, "FLAG" if m.flagged else "")
    console = Console()
    console.print(table)
    timing = ", ".join(f"{k} {v:.1f}s" for k, v in outcome.probe_seconds.items())
    console.print(f"fingerprint {profile.fingerprint}; wall {wall:.1f} s ({timing})")
    if profile.unsupported:
        console.print(f"unsupported: {', '.join(sorted(profile.unsupported))}")


def _write_diagnostics(outcome: Any, path: Path) -> None:
    import json

    data = {
        "references": outcome.references,
        "diagnostics": outcome.diagnostics,
        "probe_seconds": outcome.probe_seconds,
        "metrics": {
            name: {
                "value": m.value,
                "unit": m.unit,
                "cv": m.cv,
                "flagged": m.flagged,
                "settings": dict(m.settings),
                "note": m.note,
            }
            for name, m in outcome.profile.metrics.items()
        },
        "unsupported": dict(outcome.profile.unsupported),
    }
    path.write_text(json.dumps(data, indent=1, default=str))


def _write_partial_diagnostics(partial: Any, path: Path) -> None:
    """What a failed calibration did measure, for debugging a new GPU."""
    import json

    data = {
        "references": partial.references,
        "diagnostics": partial.diagnostics,
        "unsupported": partial.unsupported,
        "metrics": {name: m.value for name, m in partial.metrics.items()},
    }
    path.write_text(json.dumps(data, indent=1, default=str))


def devices() -> list[tuple[str, str]]:
    """(device name, architecture) of every visible GPU, by index (an indirection tests replace)."""
    count = device_count()
    if count == 0:
        raise NoDeviceError("no GPU visible to torch: --all-devices needs one")
    import torch

    table = []
    for index in range(count):
        props = torch.cuda.get_device_properties(index)
        hip = getattr(torch.version, "hip", None)
        arch = str(getattr(props, "gcnArchName", "gfx")).split(":")[0] if hip else f"sm_{props.major}{props.minor}"
        table.append((torch.cuda.get_device_name(index), arch))
    return table


def spawn(command: list[str]) -> Any:
    """Start one per-GPU calibration process (an indirection tests replace); returns what has ``wait()``."""
    return subprocess.Popen(command)


def _targets(folder: Path, names: list[str]) -> list[Path]:
    from theodolite.profile.resolve import slug

    slugs = [slug(name) for name in names]
    return [
        folder / (f"{name}-gpu{index}.h5" if slugs.index(name) != index else f"{name}.h5")
        for index, name in enumerate(slugs)
    ]


def _builds_by_architecture(architectures: list[str]) -> dict[str, tuple[tuple[Any, ...], str, float]]:
    """Compile the kernel builds once per architecture, here, while no GPU is being timed."""
    from theodolite.probes import runner

    done: dict[str, tuple[tuple[Any, ...], str, float]] = {}
    for arch in dict.fromkeys(architectures):
        print(f"compiling the kernel builds for {arch} before any GPU is timed")
        begin = time.perf_counter()
        builds, note = runner.kernel_builds(arch, print)
        done[arch] = (builds, note, time.perf_counter() - begin)
        print(f"{arch}: {note} ({done[arch][2]:.0f} s)")
    return done


def _kernel_source() -> str:
    from theodolite.kernels.build import kernel_source_key

    return kernel_source_key()


def _merge_builds(path: Path, builds: tuple[Any, ...], note: str, cards: int) -> None:
    """Put the node's shared kernel builds into one card's profile (rewritten atomically)."""
    from dataclasses import replace

    from theodolite.profile import load_profile, save_profile

    profile = load_profile(path)
    shared = f"{note} (compiled once for the node's {cards} card(s) of this architecture, before timing)"
    notes = "; ".join(part for part in (shared, profile.provenance.notes) if part)
    merged = replace(
        profile,
        provenance=replace(profile.provenance, notes=notes, kernel_source=_kernel_source() if builds else ""),
        kernel_builds=tuple(builds),
        origin=str(path),
    )
    save_profile(merged, path, overwrite=True)


def _run_each(commands: list[list[str]], sequential: bool) -> list[int]:
    """Run the per-GPU processes together (or one after another) and return their exit codes."""
    if sequential:
        return [spawn(command).wait() for command in commands]
    running = [spawn(command) for command in commands]
    return [process.wait() for process in running]


def _all_devices(args: argparse.Namespace) -> int:
    """One process per GPU, timing only; the host-heavy kernel builds run here first, never beside a timing run."""
    from theodolite.profile.resolve import user_cache_dir

    table = devices()
    folder = args.output if args.output is not None else user_cache_dir()
    if folder.suffix == ".h5":
        raise ProfileError(f"{folder}: with --all-devices, -o names a folder, not a file")
    targets = _targets(folder, [name for name, _ in table])
    for target in targets:
        _check_target(target, args.force)
    architectures = [arch for _, arch in table]
    builds = {} if args.no_builds else _builds_by_architecture(architectures)
    commands: list[list[str]] = []
    for index, target in enumerate(targets):
        command = [sys.executable, "-m", "theodolite", "calibrate", "--device", str(index), "-o", str(target)]
        command += ["--no-builds", "--no-model"] + ["--quick"] * args.quick + ["--force"] * args.force
        commands.append(command)
    codes = _run_each(commands, args.sequential)
    for index, (target, code) in enumerate(zip(targets, codes, strict=True)):
        if code == 0 and architectures[index] in builds:
            compiled, note, _ = builds[architectures[index]]
            _merge_builds(target, compiled, note, architectures.count(architectures[index]))
    if not args.no_model:
        # The model stage needs the builds (its legal configs) and compiles kernels of its own: it runs after every
        # card's probes, so no host compile overlaps another card's probe timing.
        stage = [i for i, code in enumerate(codes) if code == 0]
        commands = [
            [sys.executable, "-m", "theodolite", "calibrate", "--device", str(i), "--model-only", str(targets[i]),
             "-o", str(targets[i]), "--force"] + ["--quick"] * args.quick
            for i in stage
        ]  # fmt: skip
        for i, code in zip(stage, _run_each(commands, args.sequential), strict=True):
            codes[i] = code
    for target, code in zip(targets, codes, strict=True):
        print(f"{target}: {'ok' if code == 0 else f'failed (exit {code})'}")
    return max(codes, default=0)


def run(args: argparse.Namespace) -> int:
    if args.all_devices:
        return _all_devices(args)
    if args.model_only is not None:
        return _model_only(args)
    from theodolite.probes.runner import require_device
    from theodolite.profile import save_profile

    require_device(args.device)
    import torch

    path = args.output if args.output is not None else default_path(torch.cuda.get_device_name(args.device))
    _check_target(path, args.force)

    from rich.progress import Progress

    begin = time.perf_counter()
    with Progress(transient=False) as progress:
        task = progress.add_task("calibrating", total=None)

        def on_probe(name: str, index: int, total: int) -> None:
            progress.update(task, total=total, completed=index, description=f"probe {name}")

        try:
            outcome = run_probes(args.device, args.quick, not args.no_builds, on_probe)
        except ProfileError as error:
            partial = getattr(error, "partial", None)
            if args.diagnostics is not None and partial is not None:
                _write_partial_diagnostics(partial, args.diagnostics)
            raise
        if not args.no_model:
            profile, seconds = run_model_stage(outcome.profile, args.quick, lambda text, i, n: progress.update(
                task, total=n, completed=i, description=text), args.exclude_suite)  # fmt: skip
            outcome.profile = profile
            outcome.probe_seconds.update(seconds)
        progress.update(task, completed=progress.tasks[0].total or 1, description="done")
    _check_target(path, args.force)
    save_profile(outcome.profile, path, overwrite=args.force)
    if args.diagnostics is not None:
        _write_diagnostics(outcome, args.diagnostics)
    _summary(outcome, path, time.perf_counter() - begin)
    if not args.no_model:
        from theodolite.probes.model_stage import show

        print(show(outcome.profile))
    return 0
