"""The on-disk cache of candidate grids: same picks as a fresh build, keyed by everything they depend on."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from theodolite.kernels.config import Problem
from theodolite.model import fast, grid_cache
from theodolite.model.predict import clear_tables, table_for

from theodolite.profile.datasheet import h100_sxm
from theodolite.profile.schema import Measurement


def _fresh_class(profile):  # type: ignore[no-untyped-def]
    clear_tables()
    fast._CLASSES.clear()
    table = table_for(profile, "bf16")
    return fast.alignment_class(table, 16.0, 16.0, 2, True)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("THEODOLITE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("THEODOLITE_GRID_CACHE", raising=False)
    return tmp_path / "grids"


def test_a_loaded_grid_equals_the_built_one(cache: Path) -> None:
    profile = h100_sxm()
    built = _fresh_class(profile).build()
    files = list(cache.glob("*.npz"))
    assert len(files) == 1
    klass = _fresh_class(profile)
    loaded = grid_cache.load(klass.cache_key(), len(built), len(klass.table.configs))
    assert loaded == built
    assert klass.build() == built  # served from the file
    problem = Problem(3000, 1500, 7000)
    assert fast.choose_fast(klass.table, problem) == fast.choose_fast(_fresh_class(profile).table, problem)


def test_the_key_follows_profile_numbers_and_class(cache: Path) -> None:
    profile = h100_sxm()
    base = _fresh_class(profile).cache_key()
    faster = dataclasses.replace(
        profile,
        metrics={
            **profile.metrics,
            "hbm_read_bandwidth": Measurement("hbm_read_bandwidth", 4.0e12, "B/s", "datasheet"),
        },
    )
    assert _fresh_class(faster).cache_key() != base
    table = table_for(profile, "bf16")
    assert fast.alignment_class(table, 2.0, 16.0, 2, False).cache_key() != base
    assert _fresh_class(profile).cache_key() == base  # deterministic


def test_unreadable_or_foreign_files_are_ignored(cache: Path) -> None:
    cache.mkdir(parents=True)
    key = "0" * 32
    (cache / f"{key}.npz").write_bytes(b"not an npz file")
    assert grid_cache.load(key, 10, 5) is None
    grid_cache.save(key, [((0, 1.0, 0.0),)] * 3)  # a grid of another size under the same name
    assert grid_cache.load(key, 10, 5) is None
    assert grid_cache.load(key, 3, 5) == [((0, 1.0, 0.0),)] * 3
    grid_cache.save(key, [((7, 1.0, 0.0),)] * 3)  # an index beyond the config count
    assert grid_cache.load(key, 3, 5) is None


def test_the_cache_can_be_turned_off(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("THEODOLITE_GRID_CACHE", "0")
    assert grid_cache.cache_dir() is None
    grid_cache.save("1" * 32, [((0, 1.0, 0.0),)])
    assert not cache.exists()
