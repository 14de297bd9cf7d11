"""Re-measure one probe's metrics on this GPU into an existing profile, every other value untouched.

For a metric added after a card was calibrated (``launch_overhead_graph``), or a probe re-run after a fix, without a
whole calibration: the probe runs on this GPU as calibration runs it (topology first), the GPU must be the one the
profile was measured on (its device name), and the profile is rewritten atomically with the chosen metrics added (or,
with ``--replace``, replaced) and a line in its provenance notes saying what was measured when, with which versions.

    python -m theodolite.probes.remeasure profiles/nvidia-h100-80gb-hbm3.h5 --probe launch \\
        --metrics launch_overhead_graph
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import sys
from collections.abc import Sequence

from theodolite.probes.common import ProbeResult
from theodolite.probes.runner import PROBES

from theodolite.errors import ProfileError, TheodoliteError
from theodolite.profile.hdf5 import load_profile, save_profile
from theodolite.profile.schema import Profile


def probe_metrics(probe: str) -> tuple[str, ...]:
    """The metrics ``probe`` writes (``runner.PROBES``); ProfileError naming the known probes otherwise."""
    for name, _, writes in PROBES:
        if name == probe:
            return writes
    raise ProfileError(f"no probe {probe!r}; probes: {', '.join(name for name, _, _ in PROBES)}")


def check_same_device(profile: Profile, device_name: str) -> None:
    """ProfileError unless this GPU is the one ``profile`` was measured on (a foreign or datasheet profile)."""
    if profile.provenance.source != "measured":
        source = profile.provenance.source
        raise ProfileError(f"{profile.origin}: a {source} profile; only measured ones are re-measured")
    if profile.provenance.device_name != device_name:
        raise ProfileError(
            f"{profile.origin} was measured on {profile.provenance.device_name!r}; this GPU is {device_name!r}"
        )


def merge_measured(profile: Profile, measured: ProbeResult, names: Sequence[str], replace: bool, note: str) -> Profile:
    """``profile`` with the metrics ``names`` taken from ``measured`` and ``note`` added to its provenance notes.
    ProfileError (nothing changed) where the probe did not produce one of them, or where the profile already holds
    one and ``replace`` is off."""
    missing = [name for name in names if name not in measured.metrics]
    if missing:
        reasons = "; ".join(f"{name}: {measured.unsupported.get(name, 'not measured')}" for name in missing)
        raise ProfileError(f"the probe did not measure {', '.join(missing)} ({reasons})")
    held = [name for name in names if name in profile.metrics]
    if held and not replace:
        raise ProfileError(f"{profile.origin} already holds {', '.join(held)} (pass --replace to re-measure)")
    metrics = {**profile.metrics, **{name: measured.metrics[name] for name in names}}
    notes = "; ".join(part for part in (profile.provenance.notes, note) if part)
    provenance = dataclasses.replace(profile.provenance, notes=notes)
    return dataclasses.replace(profile, metrics=metrics, provenance=provenance)


def remeasure_note(names: Sequence[str], probe: str) -> str:
    """The provenance line: what was re-measured, when, by which versions."""
    import torch
    import triton

    from theodolite import __version__

    day = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    return (
        f"{day}: {', '.join(names)} measured later (probes.remeasure --probe {probe}; theodolite {__version__}, "
        f"triton {triton.__version__}, torch {torch.__version__})"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m theodolite.probes.remeasure", description=__doc__.splitlines()[0])
    parser.add_argument("profiles", nargs="+", help="measured profiles of this GPU to update in place")
    parser.add_argument("--probe", required=True, help="the probe to run (runner.PROBES: launch, l2, hbm, ...)")
    parser.add_argument("--metrics", default="", help="comma list (default: the probe's metrics a profile lacks)")
    parser.add_argument("--replace", action="store_true", help="replace metrics the profile already holds")
    parser.add_argument("--device", type=int, default=0, help="GPU index (default 0)")
    args = parser.parse_args(argv)
    try:
        writes = probe_metrics(args.probe)
        chosen = [name for name in args.metrics.split(",") if name]
        unknown = [name for name in chosen if name not in writes]
        if unknown:
            raise ProfileError(f"probe {args.probe} does not write {', '.join(unknown)}; it writes {', '.join(writes)}")
        import torch
        from theodolite.probes.runner import collect, require_device

        require_device(args.device)
        device_name = torch.cuda.get_device_name(args.device)
        profiles = [(path, load_profile(path)) for path in args.profiles]
        for _, profile in profiles:  # every check before the probe runs
            check_same_device(profile, device_name)
        measured, seconds = collect(args.device, only=(args.probe,))
        updates = []  # every profile merged before any is written: one refusal leaves all of them as they were
        for path, profile in profiles:
            names = chosen or [name for name in writes if name not in profile.metrics]
            if not names:
                print(f"{path}: holds every metric of probe {args.probe}; nothing to add (--metrics, --replace)")
                continue
            note = remeasure_note(names, args.probe)
            updates.append((path, names, merge_measured(profile, measured, names, args.replace, note)))
        for path, names, updated in updates:
            save_profile(updated, path, overwrite=True)
            for name in names:
                m = updated.metrics[name]
                print(f"{path}: {name} = {m.value:.4g} {m.unit} (cv {m.cv:.3f}, {m.method})")
            print(f"{path}: fingerprint {updated.fingerprint} ({seconds.get(args.probe, 0.0):.1f} s of probe)")
    except TheodoliteError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
