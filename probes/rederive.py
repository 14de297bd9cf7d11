"""Re-derive a profile's curve-derived metrics from its stored curves, on a CPU, every measured value untouched.

A derivation that changes (``hbm_saturation_sms``: the fitted saturating curve's 90% point instead of the crossing
interpolated between two grid points) need not wait for a GPU: the profile keeps the raw curve, so the metric is
computed again from it, the file rewritten, and one provenance line says what was re-derived and how.

    python -m theodolite.probes.rederive profiles/nvidia-h100-80gb-hbm3.h5 profiles/nvidia-h200.h5
    python -m theodolite.probes.rederive --check profiles/*.h5      # exit 1 when a stored value is out of date
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable, Sequence

from theodolite.probes import hbm

from theodolite.errors import TheodoliteError
from theodolite.profile.hdf5 import load_profile, save_profile
from theodolite.profile.schema import Curve, Measurement, Profile

# metric -> (curve it is read off, derivation)
DERIVATIONS: dict[str, tuple[str, Callable[[Curve], Measurement]]] = {
    "hbm_saturation_sms": ("hbm_read_bandwidth_vs_sms", hbm.saturation_measurement),
}


def rederive(profile: Profile) -> tuple[Profile, dict[str, tuple[float, float]]]:
    """(the profile with every derivable metric recomputed, {metric: (old value, new value)} of those that changed).
    A metric whose curve the profile lacks is left as it is."""
    metrics = dict(profile.metrics)
    changed: dict[str, tuple[float, float]] = {}
    for name, (curve_name, derive) in DERIVATIONS.items():
        curve = profile.curves.get(curve_name)
        if curve is None or name not in metrics:
            continue
        new = derive(curve)
        old = metrics[name]
        if old.value == new.value and old.method_version == new.method_version:
            continue
        metrics[name] = dataclasses.replace(new, attempts=old.attempts)
        changed[name] = (old.value, new.value)
    if not changed:
        return profile, changed
    line = "re-derived from stored curves on a CPU (python -m theodolite.probes.rederive): " + ", ".join(
        f"{name} {old:.4g} -> {new:.4g} (method {metrics[name].method_version})"
        for name, (old, new) in sorted(changed.items())
    )
    notes = "; ".join(part for part in (profile.provenance.notes, line) if part)
    provenance = dataclasses.replace(profile.provenance, notes=notes)
    return dataclasses.replace(profile, metrics=metrics, provenance=provenance), changed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m theodolite.probes.rederive", description=__doc__.splitlines()[0])
    parser.add_argument("profiles", nargs="+", help="HDF5 profiles to rewrite in place")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when a value is out of date")
    args = parser.parse_args(argv)
    stale = False
    try:
        for path in args.profiles:
            profile = load_profile(path)
            updated, changed = rederive(profile)
            if not changed:
                print(f"{path}: up to date")
                continue
            stale = True
            text = ", ".join(f"{name} {old:.4g} -> {new:.4g}" for name, (old, new) in sorted(changed.items()))
            if args.check:
                print(f"{path}: out of date: {text}")
            else:
                save_profile(updated, path, overwrite=True)
                print(f"{path}: {text}")
    except (TheodoliteError, OSError) as error:
        print(f"rederive: {error}", file=sys.stderr)
        return 2
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    raise SystemExit(main())
