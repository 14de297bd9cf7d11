"""The final round: torch.matmul, the sweep's fastest configs and every pick timed again side by side.

A sweep times ~100 configs one after another, so drift between them falls unevenly; the final round re-times
the few that decide the comparisons (``final_candidates``) together, and every figure reads it where it holds
both sides.  ``time_final_round`` does one shape (a failure is recorded, not raised), ``add_final_round`` a
whole results file.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from theodolite.results import Results, ShapeResult, finite_ms
from theodolite.validation.shapes import Shape
from theodolite.validation.summary import _progress, shape_line

# final(shape, keys) -> (ms per key and TORCH_KEY, errors): the side-by-side final round
Final = Callable[[Shape, list[str]], tuple[dict[str, float], dict[str, str]]]


FINAL_TOP = 4  # the sweep's fastest configs that go into the final round
FINAL_PREDICTED = 3  # and the model's best-predicted ones (a refit's new pick is then often already there)


def final_candidates(result: ShapeResult, top: int = FINAL_TOP, predicted: int = FINAL_PREDICTED) -> list[str]:
    """Configs of the final round: the sweep's ``top`` fastest, the model's pick and ``predicted`` best
    predictions, the peers' picks; only configs the sweep ran (a failed one would fail again)."""
    measured = {key: ms for key, ms in result.configs.items() if finite_ms(ms)}
    keys = sorted(measured, key=lambda key: (measured[key], key))[:top]
    if result.model_pick:
        keys.append(result.model_pick)
    by_prediction = sorted((ms, key) for key, ms in result.model_predicted_ms.items() if key in measured)
    keys += [key for _, key in by_prediction[:predicted]]
    keys += list(result.peer_picks.values())
    return [key for key in dict.fromkeys(keys) if key in measured]


def time_final_round(result: ShapeResult, final: Final) -> None:
    """Fill ``result.final_ms`` (errors under ``@final KEY``); a failure is recorded, not raised."""
    shape = Shape(result.name, result.M, result.N, result.K, result.dtype, result.layout, result.batch)
    for key in [key for key in result.errors if key.startswith("@final")]:
        del result.errors[key]
    try:
        times, errors = final(shape, final_candidates(result))
    except Exception as error:
        result.final_ms = {}
        result.errors["@final"] = f"{type(error).__name__}: {str(error)[:300]}"
        _release_memory()
        return
    result.final_ms = times
    for key, message in errors.items():
        result.errors[f"@final {key}"] = message


def add_final_round(
    results: Results,
    final: Final,
    log: Callable[[str], None] = print,
    save: Callable[[], Any] | None = None,
    redo: bool = True,
) -> int:
    """Time the final round for every shape of an existing results file (GPU); returns shapes done.
    ``redo`` False skips shapes that have one (resuming an interrupted run)."""
    todo = [
        shape
        for shape in results.shapes
        if any(finite_ms(ms) for ms in shape.configs.values()) and (redo or not shape.final_ms)
    ]
    progress = _progress(len(todo))
    for index, shape in enumerate(todo):
        t0 = time.monotonic()
        time_final_round(shape, final)
        line = shape_line(shape, time.monotonic() - t0, index + 1, len(todo))
        progress(line)
        log(line)
        if save is not None and index % 20 == 19:
            save()
    return len(todo)


def _release_memory() -> None:
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
    except Exception:
        pass
