"""Shared test set-up: GPU tests skip cleanly where no GPU is visible."""

from __future__ import annotations

import pytest


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
    import os

    os.environ["THEODOLITE_CACHE_DIR"] = str(tmp_path_factory.mktemp("theodolite-cache"))
