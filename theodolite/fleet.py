"""A fleet calibrated through Ray: one task per GPU of the cluster, then the fleet verdict.

No scheduler of our own: Ray places the work.  A placement group reserves every GPU of the cluster
at once (one bundle per GPU), so each timing task gets its own card and no card is timed twice;
Ray sets ``CUDA_VISIBLE_DEVICES`` for the task, so the task calibrates device 0 of what it sees.
Timing tasks run the probes only; the kernel builds (host compiling on every core) are compiled
afterwards, once per architecture, when no GPU is being timed anywhere, and merged into each
profile on the shared folder.  Then ``reports.fleet_check`` judges every card against the
reference and its peers.  See docs/fleet.md.

    python -m theodolite.fleet /shared/bringup-42 --address auto --quick \\
        --against profiles/nvidia-h100-80gb-hbm3.h5 --html /shared/bringup-42/fleet.html

Needs ``pip install 'theodolite[fleet]'`` (Ray) and a folder every node can write.
"""

from __future__ import annotations

import argparse
import socket
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from theodolite.errors import TheodoliteError
from theodolite.profile import KernelBuild, Profile

Measure = Callable[[int, bool], Profile]  # (device index as the task sees it, quick) -> profile
Build = Callable[[str], tuple[tuple[KernelBuild, ...], str]]  # architecture -> (builds, note)


@dataclass(frozen=True)
class Calibrated:
    path: Path
    host: str
    gpu: str
    architecture: str


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise TheodoliteError("the Ray path needs Ray: pip install 'theodolite[fleet]' (or pip install ray)") from None
    return ray


def measure_gpu(device: int, quick: bool) -> Profile:
    """The real timing run: every probe on ``device``, no kernel builds (those come later, once)."""
    from theodolite.probes.runner import run_probes

    return run_probes(device, quick=quick, with_builds=False, log=lambda _: None).profile


def compile_builds(architecture: str) -> tuple[tuple[KernelBuild, ...], str]:
    from theodolite.probes.runner import kernel_builds

    return kernel_builds(architecture, print)


def calibrate_task(output: str, quick: bool, force: bool, measure: Measure | None) -> Calibrated:
    """Body of one Ray task: calibrate the one GPU Ray gave this task, write output/<host>/<device>-gpu<id>.h5."""
    import ray

    from theodolite.profile import save_profile
    from theodolite.profile.resolve import slug

    ids = ray.get_gpu_ids()
    gpu = str(ids[0]) if ids else "0"
    host = socket.gethostname() or "host"
    profile = (measure or measure_gpu)(0, quick)
    target = Path(output) / host / f"{slug(profile.device_name)}-gpu{gpu}.h5"
    save_profile(profile, target, overwrite=force)
    return Calibrated(target, host, gpu, profile.provenance.architecture)


def calibrate_with_ray(
    output: str | Path,
    *,
    reference: str | Path | None = None,
    quick: bool = False,
    builds: bool = True,
    force: bool = False,
    html: str | Path | None = None,
    address: str | None = None,
    measure: Measure | None = None,
    build: Build | None = None,
) -> tuple[list[Calibrated], Any]:
    """Calibrate every GPU of the Ray cluster into ``output`` and return (profiles written, FleetResult).

    ``measure``/``build`` replace the GPU timing and the compile (tests run them on the CPU).  Connects to
    ``address`` (``"auto"``: a running cluster) unless Ray is already initialised.
    """
    ray = _ray()
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    from theodolite.commands.calibrate import _merge_builds
    from theodolite.profile import load_profile
    from theodolite.reports.fleet_check import fleet_check

    if not ray.is_initialized():
        ray.init(address=address)
    gpus = int(ray.cluster_resources().get("GPU", 0))
    if gpus == 0:
        raise TheodoliteError("the Ray cluster has no GPU (ray.cluster_resources() lists none)")
    folder = Path(output)
    folder.mkdir(parents=True, exist_ok=True)
    group = placement_group([{"GPU": 1, "CPU": 1}] * gpus, strategy="PACK")
    ray.get(group.ready())
    task = ray.remote(calibrate_task)
    try:
        pending = [
            task.options(
                num_gpus=1,
                num_cpus=1,
                scheduling_strategy=PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=index),
            ).remote(str(folder), quick, force, measure)
            for index in range(gpus)
        ]
        done: list[Calibrated] = ray.get(pending)
    finally:
        remove_placement_group(group)
    paths = [item.path for item in done]
    if len(set(paths)) != len(paths):
        raise TheodoliteError(f"two tasks wrote the same profile: {sorted(map(str, paths))}")
    if builds:  # every timing task has finished: compiling now disturbs no measurement
        architectures = list(dict.fromkeys(item.architecture for item in done))
        compiled = ray.get([ray.remote(build or compile_builds).remote(arch) for arch in architectures])
        for arch, (kernel_builds, note) in zip(architectures, compiled, strict=True):
            cards = [item for item in done if item.architecture == arch]
            for item in cards:
                _merge_builds(item.path, kernel_builds, note, len(cards))
    ref = load_profile(reference) if reference is not None else None
    result = fleet_check([load_profile(path) for path in sorted(paths)], ref)
    if html is not None:
        from theodolite.reports.fleet_check import render_fleet_html
        from theodolite.reports.html import write_page

        write_page(render_fleet_html(result), html)
    return sorted(done, key=lambda item: str(item.path)), result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m theodolite.fleet", description=__doc__.split("\n\n")[0])
    parser.add_argument("output", type=Path, help="shared folder: profiles land in OUTPUT/<host>/")
    parser.add_argument("--address", default="auto", help="Ray cluster address (default: auto, a running one)")
    parser.add_argument("--quick", action="store_true", help="calibrate --quick on every GPU")
    parser.add_argument("--no-builds", action="store_true", help="skip the kernel builds")
    parser.add_argument("--force", action="store_true", help="replace existing profiles")
    parser.add_argument("--against", type=Path, default=None, metavar="REF.h5", help="reference profile")
    parser.add_argument("--html", type=Path, default=None, help="write the fleet page here")
    args = parser.parse_args(argv)
    from rich.console import Console

    from theodolite.reports.fleet_check import findings_table, summary_table

    try:
        _, result = calibrate_with_ray(
            args.output,
            reference=args.against,
            quick=args.quick,
            builds=not args.no_builds,
            force=args.force,
            html=args.html,
            address=args.address,
        )
    except TheodoliteError as error:
        print(f"theodolite.fleet: error: {error}", file=sys.stderr)
        return 2
    console = Console()
    console.print(summary_table(result))
    findings = findings_table(result)
    if findings is not None:
        console.print(findings)
    return 0 if result.passed else 1


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
