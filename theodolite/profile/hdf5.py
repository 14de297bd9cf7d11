"""Reading and writing profiles as HDF5 files (format v1, see docs/profile-format.md).

Writing is atomic: the file is written under a temporary name in the target
folder and renamed over the target only when complete, so an interrupted
calibration never leaves a half-written profile.  Reading turns every
low-level failure (not HDF5, truncated, foreign layout) into a ProfileError
naming the file and the field.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from theodolite.errors import ProfileError
from theodolite.profile.schema import (
    FORMAT_MARKER,
    SCHEMA_VERSION,
    Curve,
    KernelBuild,
    Measurement,
    Profile,
    Provenance,
)

_PROVENANCE_FIELDS = tuple(Provenance.__dataclass_fields__)
_BUILD_FIELDS = tuple(KernelBuild.__dataclass_fields__)
_BUILD_INT_FIELDS = ("n_regs", "n_spills", "shared_bytes", "num_stages", "out_bytes")
# added in 1.0 files after the first ones; absent means "vector", and "" / 0 (every layout, the default output)
_BUILD_OPTIONAL = ("loads", "layout", "out_bytes")


def save_profile(profile: Profile, path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
    """Write ``profile`` to ``path`` atomically; refuse to replace an existing file unless asked."""
    target = Path(path)
    if target.exists() and not overwrite:
        raise ProfileError(f"{target}: file exists (pass overwrite/--force to replace it)")
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent)
    os.close(handle)
    try:
        with h5py.File(temporary, "w") as file:
            _write(file, profile)
        _make_readable(temporary)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target


def _write(file: h5py.File, profile: Profile) -> None:
    file.attrs["format"] = FORMAT_MARKER
    file.attrs["schema_version"] = profile.schema_version
    file.attrs["fingerprint"] = profile.fingerprint

    provenance = file.create_group("provenance")
    for name in _PROVENANCE_FIELDS:
        provenance.attrs[name] = str(getattr(profile.provenance, name))

    metrics = file.create_group("metrics")
    for name, measurement in sorted(profile.metrics.items()):
        dataset = metrics.create_dataset(name, data=np.asarray(measurement.samples, dtype=np.float64))
        dataset.attrs["value"] = measurement.value
        dataset.attrs["unit"] = measurement.unit
        dataset.attrs["method"] = measurement.method
        dataset.attrs["method_version"] = measurement.method_version
        for stat in ("p10", "p90", "mad", "cv"):
            dataset.attrs[stat] = float(getattr(measurement, stat))
        dataset.attrs["flagged"] = bool(measurement.flagged)
        dataset.attrs["note"] = measurement.note
        dataset.attrs["settings"] = json.dumps(dict(measurement.settings), sort_keys=True, default=str)
        if measurement.attempts:  # optional: only where calibration re-measured (older files never have it)
            dataset.attrs["attempts"] = json.dumps(dict(measurement.attempts), sort_keys=True, default=str)

    curves = file.create_group("curves")
    for name, curve in sorted(profile.curves.items()):
        group = curves.create_group(name)
        group.create_dataset("x", data=curve.x)
        group.create_dataset("y", data=curve.y)
        if curve.y_low is not None:
            group.create_dataset("y_low", data=curve.y_low)
        if curve.y_high is not None:
            group.create_dataset("y_high", data=curve.y_high)
        for attr in ("x_unit", "y_unit", "method", "x_label", "y_label"):
            group.attrs[attr] = getattr(curve, attr)
        group.attrs["attrs"] = json.dumps(dict(curve.attrs), sort_keys=True, default=str)

    unsupported = file.create_group("unsupported")
    for name, reason in sorted(profile.unsupported.items()):
        unsupported.attrs[name] = reason

    builds = file.create_group("kernel_builds")
    for column in _BUILD_FIELDS:
        values = [getattr(build, column) for build in profile.kernel_builds]
        if column in _BUILD_INT_FIELDS:
            builds.create_dataset(column, data=np.asarray(values, dtype=np.int64))
        else:
            builds.create_dataset(column, data=np.asarray(values, dtype=object), dtype=h5py.string_dtype())


def load_profile(path: str | os.PathLike[str]) -> Profile:
    """Read and validate a profile; every failure is a ProfileError naming the file and field."""
    source = Path(path)
    if not source.is_file():
        raise ProfileError(f"{source}: no such profile file")
    if source.stat().st_size == 0:
        raise ProfileError(f"{source}: empty file, not a profile")
    try:
        is_hdf5 = h5py.is_hdf5(source)
    except OSError as error:
        raise ProfileError(f"{source}: cannot be read ({error})") from None
    if not is_hdf5:
        raise ProfileError(f"{source}: not an HDF5 file, so not a theodolite profile")
    try:
        with h5py.File(source, "r") as file:
            return _read(file, str(source))
    except ProfileError:
        raise
    except (OSError, KeyError, ValueError, TypeError, json.JSONDecodeError) as error:
        raise ProfileError(f"{source}: corrupt or truncated profile ({type(error).__name__}: {error})") from None


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _require(node: h5py.Group | h5py.Dataset, key: str, where: str) -> Any:
    if key not in node.attrs:
        raise ProfileError(f"{where}: missing attribute {key!r} on {node.name}")
    return node.attrs[key]


def _read(file: h5py.File, where: str) -> Profile:
    marker = file.attrs.get("format")
    if marker is None or _text(marker) != FORMAT_MARKER:
        raise ProfileError(f"{where}: a foreign HDF5 file (no {FORMAT_MARKER!r} format marker at the root)")
    version = _text(_require(file, "schema_version", where))
    supported_major = SCHEMA_VERSION.split(".")[0]
    if version.split(".")[0] != supported_major:
        raise ProfileError(
            f"{where}: schema version {version} is newer or older than this theodolite reads "
            f"({supported_major}.x); use a matching theodolite"
        )
    for group in ("provenance", "metrics"):
        if group not in file:
            raise ProfileError(f"{where}: missing group /{group}")

    provenance_attrs = file["provenance"].attrs
    missing = [name for name in ("device_name", "vendor", "architecture", "source") if name not in provenance_attrs]
    if missing:
        raise ProfileError(f"{where}: provenance lacks {', '.join(missing)}")
    provenance = Provenance(
        **{name: _text(provenance_attrs[name]) for name in _PROVENANCE_FIELDS if name in provenance_attrs}
        | {name: "" for name in _PROVENANCE_FIELDS if name not in provenance_attrs}
    )

    metrics: dict[str, Measurement] = {}
    for name, dataset in file["metrics"].items():
        label = f"metric {name!r}"
        metrics[name] = Measurement(
            name=name,
            value=float(_require(dataset, "value", f"{where}: {label}")),
            unit=_text(_require(dataset, "unit", f"{where}: {label}")),
            method=_text(_require(dataset, "method", f"{where}: {label}")),
            method_version=_text(dataset.attrs.get("method_version", "1")),
            samples=np.asarray(dataset[()], dtype=np.float64),
            p10=float(dataset.attrs.get("p10", math.nan)),
            p90=float(dataset.attrs.get("p90", math.nan)),
            mad=float(dataset.attrs.get("mad", math.nan)),
            cv=float(dataset.attrs.get("cv", math.nan)),
            settings=json.loads(_text(dataset.attrs.get("settings", "{}"))),
            flagged=bool(dataset.attrs.get("flagged", False)),
            note=_text(dataset.attrs.get("note", "")),
            attempts=json.loads(_text(dataset.attrs.get("attempts", "{}"))),
        )

    curves: dict[str, Curve] = {}
    for name, group in file.get("curves", {}).items():
        label = f"{where}: curve {name!r}"
        if "x" not in group or "y" not in group:
            raise ProfileError(f"{label} lacks its x or y data")
        curves[name] = Curve(
            name=name,
            x=np.asarray(group["x"][()]),
            y=np.asarray(group["y"][()]),
            x_unit=_text(_require(group, "x_unit", label)),
            y_unit=_text(_require(group, "y_unit", label)),
            method=_text(group.attrs.get("method", "")),
            x_label=_text(group.attrs.get("x_label", "")),
            y_label=_text(group.attrs.get("y_label", "")),
            y_low=np.asarray(group["y_low"][()]) if "y_low" in group else None,
            y_high=np.asarray(group["y_high"][()]) if "y_high" in group else None,
            attrs=json.loads(_text(group.attrs.get("attrs", "{}"))),
        )

    unsupported = {name: _text(reason) for name, reason in file.get("unsupported", _EMPTY).attrs.items()}
    builds = _read_builds(file.get("kernel_builds"), where)

    profile = Profile(
        provenance=provenance,
        metrics=metrics,
        curves=curves,
        unsupported=unsupported,
        kernel_builds=builds,
        schema_version=version,
        origin=where,
    )
    stored = file.attrs.get("fingerprint")
    if stored is not None and _text(stored) != profile.fingerprint:
        raise ProfileError(f"{where}: fingerprint mismatch: the values were changed after the profile was written")
    return profile


class _Empty:
    attrs: Mapping[str, Any] = {}


_EMPTY = _Empty()


def _read_builds(group: h5py.Group | None, where: str) -> tuple[KernelBuild, ...]:
    if group is None or len(group) == 0:
        return ()
    missing = [column for column in _BUILD_FIELDS if column not in group and column not in _BUILD_OPTIONAL]
    if missing:
        raise ProfileError(f"{where}: /kernel_builds lacks column(s) {', '.join(missing)}")
    columns = {column: group[column][()] for column in _BUILD_FIELDS if column in group}
    lengths = {len(values) for values in columns.values()}
    if len(lengths) != 1:
        raise ProfileError(f"{where}: /kernel_builds columns have different lengths")
    rows = []
    for index in range(lengths.pop()):
        row = {
            column: int(values[index]) if column in _BUILD_INT_FIELDS else _text(values[index])
            for column, values in columns.items()
        }
        rows.append(KernelBuild(**row))  # type: ignore[arg-type]
    return tuple(rows)


def _make_readable(path: str) -> None:
    """mkstemp creates files readable by the owner only; give the result the usual umask permissions."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, 0o666 & ~umask)
