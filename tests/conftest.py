"""Shared test set-up: GPU tests skip cleanly where no GPU is visible."""

from __future__ import annotations

import os

import pytest

try:  # the GPU machines run the GPU tests without hypothesis installed
    from hypothesis import settings
except ImportError:
    settings = None
if settings is not None:
    # Property tests draw the same examples on every run (derandomized: a CI result is reproducible, a red run
    # is not a dice roll); HYPOTHESIS_PROFILE=explore draws fresh random examples to search for new failures.
    settings.register_profile("repeatable", derandomize=True, print_blob=True)
    settings.register_profile("explore", derandomize=False, print_blob=True)
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))


def _gpu_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _gpu_available():
        return
    skip = pytest.mark.skip(reason="needs a GPU (marker 'gpu'); none is visible")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True, scope="session")
def _private_grid_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Candidate grids (model.grid_cache) go to a fresh folder: tests neither read a stale user cache nor
    leave files in the home directory."""
    os.environ["THEODOLITE_CACHE_DIR"] = str(tmp_path_factory.mktemp("theodolite-cache"))
