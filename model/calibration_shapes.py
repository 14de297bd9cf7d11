"""The calibration shape set: what calibrate fits the model on, drawn from a seed and kept out of every report suite.

Shapes are drawn log-uniformly (M in [1, 16384] with extra mass at decode sizes M <= 64, N in [16, 131072], K in
[16, 65536]), half of them rounded to multiples of 64 or 128 and half left odd, in layouts nn and nt.  Any shape
whose (M, N, K) is in a bundled suite (llm.csv, random-dev.csv) or in a suite given to ``calibration_shapes``
(a report suite) is redrawn, so the accuracy reported on those suites is out of sample; ``check_disjoint`` says so
for a stored set.  The seed stream is this module's own (``SEED_SALT``), apart from the report generators'.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from theodolite.errors import TheodoliteError

DEFAULT_SEED = 20260701  # the calibration set of this profile version (stored in the profile with the shapes)
SEED_SALT = "theodolite-calibration"  # mixed into the seed: a report suite's seed never draws these shapes
REPORT_SUITES = ("llm", "random-dev")


class CalibrationShapesError(TheodoliteError):
    """A calibration set that overlaps a report suite, or a bad request for one."""


@dataclass(frozen=True)
class CalShape:
    name: str
    m: int
    n: int
    k: int
    layout: str

    @property
    def mnk(self) -> tuple[int, int, int]:
        return (self.m, self.n, self.k)

    def as_list(self) -> list[object]:
        return [self.name, self.m, self.n, self.k, self.layout]


def _log_uniform(rng: random.Random, low: float, high: float) -> int:
    return int(round(math.exp(rng.uniform(math.log(low), math.log(high)))))


def _draw(rng: random.Random) -> tuple[int, int, int]:
    m = _log_uniform(rng, 1, 64) if rng.random() < 0.1 else _log_uniform(rng, 1, 16384)
    n = _log_uniform(rng, 16, 131072)
    k = _log_uniform(rng, 16, 65536)
    if rng.random() < 0.5:  # aligned sizes, as most model layers have
        step = rng.choice((64, 128))
        n, k = max(step, round(n / step) * step), max(step, round(k / step) * step)
        if m > 64:
            m = max(step, round(m / step) * step)
    return m, n, k


def suite_mnk(names: Iterable[str]) -> set[tuple[int, int, int]]:
    """(M, N, K) of every shape of the named suites (kernels.shapes.load_suite names or CSV paths)."""
    from theodolite.kernels.shapes import load_suite

    return {(m, n, k) for name in names for _, m, n, k in load_suite(name)}


def calibration_shapes(
    count: int,
    seed: int = DEFAULT_SEED,
    exclude: Sequence[str] = (),
    max_flops: float = 2.0e12,
) -> list[CalShape]:
    """``count`` shapes from ``seed`` (layouts alternate nn / nt), none in the bundled or the ``exclude`` suites, none
    over ``max_flops`` (2 TFLOP: about 5 ms on an H100-class GPU, so one shape's timing stays short)."""
    if count < 1:
        raise CalibrationShapesError(f"a calibration set needs at least one shape (asked for {count})")
    banned = suite_mnk((*REPORT_SUITES, *exclude))
    rng = random.Random(f"{SEED_SALT}:{seed}")
    shapes: list[CalShape] = []
    seen: set[tuple[int, int, int]] = set()
    tries = 0
    while len(shapes) < count:
        tries += 1
        if tries > 100 * count:
            raise CalibrationShapesError(f"could not draw {count} shapes outside the report suites")
        m, n, k = _draw(rng)
        if (m, n, k) in banned or (m, n, k) in seen or 2.0 * m * n * k > max_flops:
            continue
        seen.add((m, n, k))
        shapes.append(CalShape(f"cal{len(shapes):03d}", m, n, k, "nn" if len(shapes) % 2 == 0 else "nt"))
    return shapes


def check_disjoint(shapes: Sequence[CalShape] | Sequence[tuple[int, int, int]], suites: Sequence[str] = ()) -> None:
    """CalibrationShapesError naming the shapes a calibration set shares with the bundled or named report suites."""
    mnk = [s.mnk if isinstance(s, CalShape) else tuple(s) for s in shapes]
    shared = sorted(set(mnk) & suite_mnk((*REPORT_SUITES, *suites)))
    if shared:
        listed = ", ".join(f"{m}x{n}x{k}" for m, n, k in shared[:5])
        raise CalibrationShapesError(
            f"the calibration set shares {len(shared)} shape(s) with the report suites: {listed}"
            " (fitting on them would make the reported accuracy in-sample)"
        )
