"""Add the metrics a profile's stored curves already determine, with no GPU.

For profiles calibrated before such a metric existed: the curve is measured data, and the metric is
computed from it exactly as calibration computes it now; the profile is rewritten atomically with every
other value untouched, and a metric the profile already holds is left as it is.

    python -m theodolite.probes.derive profiles/nvidia-h100-80gb-hbm3.h5 profiles/nvidia-h200.h5
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable, Sequence

from theodolite.probes.hbm import one_sm_bandwidth

from theodolite.errors import TheodoliteError
from theodolite.profile.hdf5 import load_profile, save_profile
from theodolite.profile.schema import Curve, Measurement, Profile

# metric -> (the curve it comes from, the probe's own derivation)
DERIVED: dict[str, tuple[str, Callable[[Curve], Measurement]]] = {
    "hbm_read_bandwidth_one_sm": ("hbm_read_bandwidth_vs_sms", one_sm_bandwidth),
}


def derive(profile: Profile) -> tuple[Profile, list[str]]:
    """The profile with every derivable metric it lacks added, and their names."""
    metrics = dict(profile.metrics)
    added = []
    for name, (curve_name, compute) in DERIVED.items():
        curve = profile.curves.get(curve_name)
        if name in metrics or curve is None:
            continue
        measurement = compute(curve)
        note = f"{measurement.note}; derived later from the stored curve (python -m theodolite.probes.derive)"
        metrics[name] = dataclasses.replace(measurement, note=note)
        added.append(name)
    return dataclasses.replace(profile, metrics=metrics), added


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m theodolite.probes.derive", description=__doc__.splitlines()[0])
    parser.add_argument("profiles", nargs="+", help="profile files to update in place")
    args = parser.parse_args(argv)
    try:
        for path in args.profiles:
            updated, added = derive(load_profile(path))
            if added:
                save_profile(updated, path, overwrite=True)
            for name in added:
                m = updated.metrics[name]
                print(f"{path}: {name} = {m.value:.4g} {m.unit} (from {len(m.samples)} points)")
            if not added:
                print(f"{path}: nothing to add")
    except TheodoliteError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
