"""Hardware profiles: the measured contract between probes and the model."""

from theodolite.errors import ProfileError
from theodolite.profile.hdf5 import load_profile, save_profile
from theodolite.profile.resolve import load, resolve_profile_path
from theodolite.profile.schema import (
    METRICS,
    SCHEMA_VERSION,
    Curve,
    KernelBuild,
    Measurement,
    MetricSpec,
    Profile,
    Provenance,
)

__all__ = [
    "METRICS",
    "SCHEMA_VERSION",
    "Curve",
    "KernelBuild",
    "Measurement",
    "MetricSpec",
    "Profile",
    "ProfileError",
    "Provenance",
    "load",
    "load_profile",
    "resolve_profile_path",
    "save_profile",
]
