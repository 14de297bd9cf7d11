"""On-disk cache of the fast path's candidate grids (``model.fast.AlignmentClass.build``).

Building one grid evaluates the full model on ~100k grid points: 2-3 s, paid by the first selection of
each alignment class in every new process. The grid is a pure function of the model code, the
profile's numbers and the class, so it is stored once under
``$THEODOLITE_CACHE_DIR`` (default ``$XDG_CACHE_HOME/theodolite/grids`` or ``~/.cache/theodolite/grids``)
and later processes load it in ~50 ms. The file name is a hash of everything the grid depends on: the
source of the model and of the kernels' config module, the profile fingerprint, the hardware numbers
the model computes with (parameter overrides included), the class and the grid's constants. Files are
plain arrays (``numpy.load(allow_pickle=False)``), written atomically; an unreadable or mismatched
file is ignored and rebuilt. ``THEODOLITE_GRID_CACHE=0`` turns the cache off.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

FORMAT = 2  # bump when the file layout changes (2: each candidate's centre fill)
# modules whose source decides a grid (the cost formula, its inputs, the config space and legality)
_SOURCES = ("core", "fast", "predict", "compute", "memory", "occupancy", "hardware", "variants")

# per cell: (config index, lower bound of its cost in the cell, its waves' fill at the centre or 0: unconditional)
Grid = list[tuple[tuple[int, float, float], ...]]


def cache_dir() -> Path | None:
    """Where grids are kept; None when the cache is turned off."""
    if os.environ.get("THEODOLITE_GRID_CACHE", "1") in ("0", ""):
        return None
    explicit = os.environ.get("THEODOLITE_CACHE_DIR")
    if explicit:
        return Path(explicit) / "grids"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "theodolite" / "grids"


@lru_cache(maxsize=1)
def code_digest() -> str:
    """sha256 of the source files a grid depends on (a code change is a new cache key)."""
    from theodolite.kernels import config as kernel_config

    here = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in [here / f"{name}.py" for name in _SOURCES] + [Path(kernel_config.__file__).resolve()]:
        digest.update(path.name.encode())
        digest.update(path.read_bytes() if path.exists() else b"-")
    return digest.hexdigest()


def grid_key(parts: Sequence[object]) -> str:
    """The file stem for a grid described by ``parts`` (reprs of plain values), with the code digest."""
    digest = hashlib.sha256(f"{FORMAT}|{code_digest()}".encode())
    for part in parts:
        digest.update(b"|")
        digest.update(repr(part).encode())
    return digest.hexdigest()[:32]


def load(key: str, cells: int, configs: int) -> Grid | None:
    """The cached grid of ``key`` if a readable file of the expected size is there, else None."""
    folder = cache_dir()
    if folder is None:
        return None
    path = folder / f"{key}.npz"
    try:
        with np.load(path, allow_pickle=False) as data:
            offsets, index, low, fill = data["offsets"], data["index"], data["low"], data["fill"]
    except (OSError, KeyError, ValueError):
        return None
    if offsets.shape != (cells + 1,) or not index.shape == low.shape == fill.shape or int(offsets[-1]) != index.size:
        return None
    if index.size and (int(index.min()) < 0 or int(index.max()) >= configs):
        return None
    ends = offsets.tolist()
    triples = list(zip(index.tolist(), low.tolist(), fill.tolist(), strict=True))
    return [tuple(triples[ends[r] : ends[r + 1]]) for r in range(cells)]


def save(key: str, grid: Grid) -> None:
    """Store ``grid`` under ``key`` (atomically; a cache that cannot be written is skipped silently)."""
    folder = cache_dir()
    if folder is None:
        return
    sizes = np.fromiter((len(cell) for cell in grid), dtype=np.int64, count=len(grid))
    offsets = np.concatenate(([0], np.cumsum(sizes)))
    index = np.fromiter((i for cell in grid for i, _, _ in cell), dtype=np.int32, count=int(offsets[-1]))
    low = np.fromiter((x for cell in grid for _, x, _ in cell), dtype=np.float64, count=int(offsets[-1]))
    fill = np.fromiter((f for cell in grid for _, _, f in cell), dtype=np.float64, count=int(offsets[-1]))
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=folder, suffix=".tmp")
        try:
            with os.fdopen(handle, "wb") as stream:
                np.savez(stream, offsets=offsets, index=index, low=low, fill=fill)
            os.replace(temporary, folder / f"{key}.npz")
        finally:
            if os.path.exists(temporary):
                os.unlink(temporary)
    except OSError:
        return
