"""Shape suites for benchmarks and validation: ``load_suite(name_or_path) -> [(name, M, N, K)]``.

Names: ``llm`` and ``random-dev`` (bundled CSVs), ``square`` (powers of two 256..16384),
``random:N:seed`` (log-uniform in [16, 16384]), or a CSV path with header ``name,M,N,K[,dtype][,layout]``
(extra columns are ignored here; ``load_suite_rows`` keeps them).
"""

from __future__ import annotations

import csv
import math
import random
from pathlib import Path

from theodolite.errors import TheodoliteError

SHAPES_DIR = Path(__file__).resolve().parent / "shapes"
BUNDLED = {"llm": SHAPES_DIR / "llm.csv", "random-dev": SHAPES_DIR / "random-dev.csv"}


class ShapeSuiteError(TheodoliteError):
    """A shape suite name or file that cannot be read."""


def load_suite_rows(name_or_path: str) -> list[dict[str, str]]:
    """Rows (dicts with at least name, M, N, K) of a suite."""
    if name_or_path == "square":
        return [
            {"name": f"square{s}", "M": str(s), "N": str(s), "K": str(s)}
            for s in (256, 512, 1024, 2048, 4096, 8192, 16384)
        ]
    if name_or_path.startswith("random:"):
        try:
            _, count, seed = name_or_path.split(":")
            rng = random.Random(int(seed))
            rows = []
            for i in range(int(count)):
                dims = [int(round(math.exp(rng.uniform(math.log(16), math.log(16384))))) for _ in range(3)]
                rows.append({"name": f"random{i:03d}", "M": str(dims[0]), "N": str(dims[1]), "K": str(dims[2])})
            return rows
        except ValueError:
            raise ShapeSuiteError(f"bad random suite {name_or_path!r}: expected random:COUNT:SEED") from None
    path = BUNDLED.get(name_or_path, Path(name_or_path))
    if not path.is_file():
        raise ShapeSuiteError(
            f"no shape suite {name_or_path!r} (names: llm, random-dev, square, random:N:seed, or a CSV)"
        )
    lines = [line for line in path.read_text().splitlines() if line.strip() and not line.lstrip().startswith("#")]
    reader = csv.DictReader(lines)
    rows = []
    for row in reader:
        try:
            for key in ("M", "N", "K"):
                if int(row[key]) < 0:
                    raise ValueError
        except (KeyError, TypeError, ValueError):
            raise ShapeSuiteError(f"{path}: bad row {row} (need name,M,N,K with non-negative sizes)") from None
        rows.append({key: value.strip() for key, value in row.items() if key is not None and value is not None})
    return rows


def load_suite(name_or_path: str) -> list[tuple[str, int, int, int]]:
    """(name, M, N, K) of every shape of a suite, in file order."""
    return [(row["name"], int(row["M"]), int(row["N"]), int(row["K"])) for row in load_suite_rows(name_or_path)]
