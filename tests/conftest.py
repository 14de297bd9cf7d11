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


@pytest.fixture
def interpreted_launch_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """gemm()'s launch cache on in Triton's interpreter (it is off there: no compiled kernel to launch directly): each
    launch the cache re-binds runs through the interpreter with the arguments a GPU's direct launch would receive.
    Its entries leave with the test."""
    import inspect

    from theodolite.kernels import launch  # lazily: interpreter tests set TRITON_INTERPRET before the kernels load

    def compile_through_interpreter(self):  # type: ignore[no-untyped-def]
        signature = inspect.signature(self.kernel.fn)
        kwargs = {key: value for key, value in self.kwargs.items() if key in signature.parameters}
        bound = signature.bind(*self.args, **kwargs)
        bound.apply_defaults()
        self.ordered = list(bound.arguments.values())
        kernel, grid = self.kernel, self.grid
        self.runner = lambda *args: kernel[grid](*args)
        self.runner(*self.ordered)
        return True

    monkeypatch.setattr(launch._Launch, "compile", compile_through_interpreter)
    monkeypatch.setattr(launch, "fast_launch_enabled", lambda: True)
    monkeypatch.setattr(launch, "_FAST", {})
