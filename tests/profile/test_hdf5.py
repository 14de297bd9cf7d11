from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest

from theodolite.errors import ProfileError
from theodolite.profile import Profile, load_profile, save_profile
from theodolite.profile.datasheet import mi300x


def test_round_trip(tmp_path: Path, measured_profile: Profile) -> None:
    path = save_profile(measured_profile, tmp_path / "p.h5")
    loaded = load_profile(path)
    assert loaded.fingerprint == measured_profile.fingerprint
    assert loaded.provenance == measured_profile.provenance
    assert set(loaded.metrics) == set(measured_profile.metrics)
    for name, original in measured_profile.metrics.items():
        copy = loaded.metrics[name]
        assert copy.value == original.value and copy.unit == original.unit and copy.method == original.method
        np.testing.assert_array_equal(copy.samples, original.samples)
        assert dict(copy.settings) == dict(original.settings)
        assert copy.flagged == original.flagged
    curve = loaded.curves["l2_working_set_bandwidth"]
    np.testing.assert_array_equal(curve.y, measured_profile.curves["l2_working_set_bandwidth"].y)
    assert curve.attrs["knee"] == 45e6
    assert loaded.kernel_builds == measured_profile.kernel_builds
    assert loaded.kernel_build("persistent", "256x256x64-g8-w8-s3", "bf16").n_spills == 120
    assert dict(loaded.unsupported) == dict(measured_profile.unsupported)


def test_refuses_to_overwrite(tmp_path: Path) -> None:
    path = save_profile(mi300x(), tmp_path / "p.h5")
    with pytest.raises(ProfileError, match="exists"):
        save_profile(mi300x(), path)
    save_profile(mi300x(), path, overwrite=True)


def test_interrupted_write_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import theodolite.profile.hdf5 as hdf5

    def explode(file: h5py.File, profile: Profile) -> None:
        file.attrs["format"] = "half"
        raise KeyboardInterrupt

    monkeypatch.setattr(hdf5, "_write", explode)
    with pytest.raises(KeyboardInterrupt):
        save_profile(mi300x(), tmp_path / "p.h5")
    assert list(tmp_path.iterdir()) == []


def test_interrupted_overwrite_keeps_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import theodolite.profile.hdf5 as hdf5

    path = save_profile(mi300x(), tmp_path / "p.h5")
    monkeypatch.setattr(hdf5, "_write", lambda file, profile: (_ for _ in ()).throw(RuntimeError("disk full")))
    with pytest.raises(RuntimeError):
        save_profile(mi300x(), path, overwrite=True)
    assert load_profile(path).fingerprint == mi300x().fingerprint
    assert [p.name for p in tmp_path.iterdir()] == ["p.h5"]


@pytest.mark.parametrize(
    ("content", "message"),
    [(b"", "empty"), (b"hello, not a profile\n" * 10, "not an HDF5")],
)
def test_bad_files(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.h5"
    path.write_bytes(content)
    with pytest.raises(ProfileError, match=message):
        load_profile(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="no such profile"):
        load_profile(tmp_path / "absent.h5")


def test_truncated_file(tmp_path: Path, measured_profile: Profile) -> None:
    path = save_profile(measured_profile, tmp_path / "p.h5")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ProfileError, match=str(path)):
        load_profile(path)


def test_foreign_hdf5(tmp_path: Path) -> None:
    path = tmp_path / "foreign.h5"
    with h5py.File(path, "w") as file:
        file.create_dataset("weights", data=np.ones(3))
    with pytest.raises(ProfileError, match="foreign"):
        load_profile(path)


def _edit(path: Path, action) -> None:  # type: ignore[no-untyped-def]
    with h5py.File(path, "r+") as file:
        action(file)


def test_newer_schema_refused(tmp_path: Path) -> None:
    path = save_profile(mi300x(), tmp_path / "p.h5")
    _edit(path, lambda f: f.attrs.__setitem__("schema_version", "2.0"))
    with pytest.raises(ProfileError, match="schema version 2.0"):
        load_profile(path)


def test_negative_bandwidth_in_file_named(tmp_path: Path) -> None:
    path = save_profile(mi300x(), tmp_path / "p.h5")
    _edit(path, lambda f: f["metrics/hbm_read_bandwidth"].attrs.__setitem__("value", -1.0))
    with pytest.raises(ProfileError, match=r"p\.h5.*hbm_read_bandwidth"):
        load_profile(path)


def test_missing_unit_named(tmp_path: Path) -> None:
    path = save_profile(mi300x(), tmp_path / "p.h5")
    _edit(path, lambda f: f["metrics/l2_bandwidth"].attrs.__delitem__("unit"))
    with pytest.raises(ProfileError, match="unit"):
        load_profile(path)


def test_missing_group_and_required_metric(tmp_path: Path) -> None:
    path = save_profile(mi300x(), tmp_path / "p.h5")
    _edit(path, lambda f: f.__delitem__("metrics/sm_count"))
    with pytest.raises(ProfileError, match="sm_count"):
        load_profile(path)
    _edit(path, lambda f: f.__delitem__("provenance"))
    with pytest.raises(ProfileError, match="provenance"):
        load_profile(path)


def test_tampered_value_detected_by_fingerprint(tmp_path: Path) -> None:
    path = save_profile(mi300x(), tmp_path / "p.h5")
    _edit(path, lambda f: f["metrics/l2_bandwidth"].attrs.__setitem__("value", 1.0e13))
    with pytest.raises(ProfileError, match="fingerprint"):
        load_profile(path)


def test_bundled_profiles_load() -> None:
    from theodolite.profile.resolve import bundled_profiles

    paths = bundled_profiles()
    assert any(p.name == "amd-instinct-mi300x.h5" for p in paths)
    for path in paths:
        assert load_profile(path).metrics
