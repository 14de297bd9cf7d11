"""Shape suites for benchmarks and validation: ``load_suite(name_or_path) -> [(name, M, N, K)]``.

Names: ``llm`` and ``random-dev`` (bundled CSVs), ``square`` (powers of two 256..16384),
``random:N:seed`` (log-uniform in [16, 16384]), ``decode`` (M = 1 .. 64 against every weight of llm.csv: what LLM
serving runs most), ``wide:N:seed`` (M from 1, N up to 131072, K up to 65536, odd and aligned sizes, layouts nn and
nt in turn), or a CSV path with header ``name,M,N,K[,dtype][,layout]`` (extra columns are ignored here;
``load_suite_rows`` keeps them).
"""

from __future__ import annotations

import csv
import math
import random
from pathlib import Path

from theodolite.errors import TheodoliteError

SHAPES_DIR = Path(__file__).resolve().parent / "shapes"
BUNDLED = {"llm": SHAPES_DIR / "llm.csv", "random-dev": SHAPES_DIR / "random-dev.csv"}
DECODE_M = (1, 2, 4, 8, 16, 32, 64)
# wide:COUNT:SEED draws each size log-uniform in these ranges (inclusive)
WIDE_RANGES = {"M": (1, 16384), "N": (16, 131072), "K": (16, 65536)}
WIDE_MAX_FLOPS = 4e12  # about 6 ms at an H100's bf16 rate: every legal config of a shape is timed in validation
WIDE_MAX_BYTES = 2**32  # A, B and C together (bf16), so rotated copies and the largest weights (N 128k x K 32k) fit
WIDE_ALIGNED_SHARE = 0.5  # the share of sizes rounded to a multiple of 64 (else a multiple of 8 or odd, half each)


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
        count, seed = _count_and_seed(name_or_path, "random")
        rng = random.Random(seed)
        rows = []
        for i in range(count):
            dims = [int(round(math.exp(rng.uniform(math.log(16), math.log(16384))))) for _ in range(3)]
            rows.append({"name": f"random{i:03d}", "M": str(dims[0]), "N": str(dims[1]), "K": str(dims[2])})
        return rows
    if name_or_path == "decode":
        return decode_rows()
    if name_or_path.startswith("wide:"):
        return wide_rows(name_or_path)
    path = BUNDLED.get(name_or_path, Path(name_or_path))
    if not path.is_file():
        raise ShapeSuiteError(
            f"no shape suite {name_or_path!r} (names: llm, random-dev, square, random:N:seed, decode, wide:N:seed, "
            "or a CSV)"
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


def _count_and_seed(spec: str, kind: str) -> tuple[int, int]:
    """COUNT and SEED of ``kind:COUNT:SEED`` (COUNT at least 1: an empty suite would validate nothing, silently)."""
    try:
        _, count, seed = spec.split(":")
        total, value = int(count), int(seed)
    except ValueError:
        raise ShapeSuiteError(f"bad {kind} suite {spec!r}: expected {kind}:COUNT:SEED") from None
    if total < 1:
        raise ShapeSuiteError(f"bad {kind} suite {spec!r}: COUNT must be at least 1")
    return total, value


def load_suite(name_or_path: str) -> list[tuple[str, int, int, int]]:
    """(name, M, N, K) of every shape of a suite, in file order."""
    return [(row["name"], int(row["M"]), int(row["N"]), int(row["K"])) for row in load_suite_rows(name_or_path)]


def decode_rows() -> list[dict[str, str]]:
    """Decode: M in DECODE_M against each distinct (N, K) weight of llm.csv, in file order (12 weights: 84 shapes)."""
    weights = list(dict.fromkeys((row["name"], int(row["N"]), int(row["K"])) for row in load_suite_rows("llm")))
    seen: set[tuple[int, int]] = set()
    rows = []
    for name, n, k in weights:
        if (n, k) in seen:
            continue
        seen.add((n, k))
        rows += [{"name": f"{name}.m{m}", "M": str(m), "N": str(n), "K": str(k)} for m in DECODE_M]
    return rows


def _too_big(dims: dict[str, int]) -> bool:
    m, n, k = dims["M"], dims["N"], dims["K"]
    return 2.0 * m * n * k > WIDE_MAX_FLOPS or 2 * (m * k + k * n + m * n) > WIDE_MAX_BYTES


def wide_rows(spec: str) -> list[dict[str, str]]:
    """``wide:COUNT:SEED``: sizes log-uniform in WIDE_RANGES (M from 1: decode and skinny shapes; a draw over
    WIDE_MAX_FLOPS or WIDE_MAX_BYTES is drawn again), half of them multiples of 64, a quarter multiples of 8, a
    quarter left as drawn (odd rows: misaligned loads); a layout column alternating nn and nt.  ``random:COUNT:SEED``
    stays as it was, for reproducibility."""
    total, seed = _count_and_seed(spec, "wide")
    rng = random.Random(seed)
    rows = []
    for i in range(total):
        dims: dict[str, int] = {}
        while not dims or _too_big(dims):  # drawn again until one exhaustive sweep of it stays affordable
            dims = {}
            for key, (low, high) in WIDE_RANGES.items():
                value = int(round(math.exp(rng.uniform(math.log(low), math.log(high)))))
                roll = rng.random()
                if roll < WIDE_ALIGNED_SHARE:
                    value = max(64, round(value / 64) * 64) if value >= 32 else value
                elif roll < (1 + WIDE_ALIGNED_SHARE) / 2:
                    value = max(8, round(value / 8) * 8) if value >= 4 else value
                dims[key] = min(max(value, low), high)
        layout = "nn" if i % 2 == 0 else "nt"
        rows.append({"name": f"wide{i:03d}", **{key: str(value) for key, value in dims.items()}, "layout": layout})
    return rows
