"""What a validation runs over: its settings, the shapes of a suite, and shards of them.

``Shape`` is one GEMM of a suite (sizes, dtype, layout, batch); ``ValidateSettings`` carries every option of
``theodolite validate``; ``parse_shard``/``shard_of`` split a suite over several machines (shards interleave, so
each gets small and large shapes) and ``result_key`` matches a shape to its row in a results file (resume).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from theodolite.errors import TheodoliteError
from theodolite.kernels.config import DTYPE_BYTES, Problem
from theodolite.results import ShapeResult


class ValidationError(TheodoliteError):
    """A validation request that cannot be carried out (bad shard, no GPU, unknown peer, ...)."""


@dataclass(frozen=True)
class Shape:
    name: str
    m: int
    n: int
    k: int
    dtype: str = "bf16"
    layout: str = "nn"
    batch: int = 1

    @property
    def key(self) -> tuple[Any, ...]:
        return (self.name, self.m, self.n, self.k, self.dtype, self.layout, self.batch)

    @property
    def problem(self) -> Problem:
        return Problem(self.m, self.n, self.k, dtype=self.dtype, batch=self.batch, layout=self.layout)


def result_key(shape: ShapeResult) -> tuple[Any, ...]:
    return (shape.name, shape.M, shape.N, shape.K, shape.dtype, shape.layout, shape.batch)


def load_shapes(spec: str, dtype: str = "bf16", layout: str = "nn") -> list[Shape]:
    """Shapes of a suite (llm, random-dev, square, random:N:seed, decode, wide:N:seed, or a CSV with optional
    dtype/layout columns)."""
    from theodolite.kernels.shapes import load_suite_rows

    shapes = []
    for row in load_suite_rows(spec):
        shape = Shape(
            row["name"],
            int(row["M"]),
            int(row["N"]),
            int(row["K"]),
            (row.get("dtype") or dtype).strip(),
            (row.get("layout") or layout).strip(),
        )
        if shape.dtype not in DTYPE_BYTES:
            raise ValidationError(f"shape {shape.name}: unknown dtype {shape.dtype!r}")
        shapes.append(shape)
    return shapes


T = TypeVar("T")


def parse_shard(text: str | None) -> tuple[int, int]:
    """'i/n' with 0 <= i < n (shard i of n, zero-based) -> (i, n); None -> (0, 1)."""
    if text is None:
        return 0, 1
    try:
        index, count = (int(part) for part in text.split("/"))
    except ValueError:
        raise ValidationError(f"bad --shard {text!r}: expected i/n, e.g. 0/4 (zero-based)") from None
    if count < 1 or not 0 <= index < count:
        raise ValidationError(f"bad --shard {text!r}: need 0 <= i < n (zero-based shard index)")
    return index, count


def shard_of(shapes: Sequence[T], index: int, count: int) -> list[T]:
    """Every count-th shape starting at index: shards interleave, so each gets small and large shapes."""
    return list(shapes[index::count])


@dataclass
class ValidateSettings:
    suite: str = "llm"
    dtype: str = "bf16"
    layout: str = "nn"
    peers: tuple[str, ...] = ("fixed", "nvmmh")
    shard: tuple[int, int] = (0, 1)
    resume: bool = False
    budget_s: float | None = None
    variants: tuple[str, ...] | None = None
    rep_ms: float = 8.0
    max_reps: int = 50
    precompile: bool = True
    workers: int = 0
    final: bool = True  # time the final round (torch, the sweep's best few and the picks side by side)
