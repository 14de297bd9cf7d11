"""Benchmark and validation results: one JSON file, written atomically, read by reports and the model's tests.

``bench`` and ``validate`` write the same format; ``validate`` fills the model fields too.  A path ending in ``.gz``
is written and read gzip-compressed (an exhaustive sweep of 300 shapes: 3.3 MB of JSON, 0.5 MB compressed).
Times are medians in milliseconds (``triton.testing.do_bench``); a config that failed to
compile or run has ``null`` time and its message under ``errors``.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from theodolite.errors import TheodoliteError

RESULTS_FORMAT = "theodolite-results"
RESULTS_VERSION = 2  # 2: ShapeResult.final_ms (the side-by-side final round)
TORCH_KEY = "torch"  # torch.matmul's entry in ShapeResult.final_ms


class ResultsError(TheodoliteError):
    """A results file that is missing, corrupt or of another format."""


@dataclass
class ShapeResult:
    """Every timing for one problem shape, measured side by side in one run."""

    name: str
    M: int
    N: int
    K: int
    dtype: str = "bf16"
    layout: str = "nn"
    batch: int = 1
    torch_ms: float | None = None
    configs: dict[str, float | None] = field(default_factory=dict)  # config key -> median ms
    errors: dict[str, str] = field(default_factory=dict)  # config key -> why it failed
    max_rel_error: dict[str, float] = field(default_factory=dict)  # config key -> vs torch.matmul
    model_pick: str | None = None
    model_predicted_ms: dict[str, float] = field(default_factory=dict)  # config key -> predicted ms
    model_bottleneck: str | None = None
    selection_us: float | None = None  # model's selection time for this shape
    peer_picks: dict[str, str] = field(default_factory=dict)  # "fixed", "nvmmh", "autotune" -> config key
    autotune_wall_s: float | None = None
    # The final round: torch.matmul (TORCH_KEY), the sweep's fastest few, the model's and the peers' picks
    # timed again side by side, interleaved round by round.  A sweep times configs one after another, so
    # clock drift and the minimum over ~100 noisy times bias its oracle; comparisons read this when present.
    final_ms: dict[str, float] = field(default_factory=dict)

    @property
    def flops(self) -> float:
        return 2.0 * self.batch * self.M * self.N * self.K

    def best(self) -> tuple[str, float] | None:
        """The fastest config that ran (the exhaustive oracle)."""
        return _fastest(self.configs)

    def final_best(self) -> tuple[str, float] | None:
        """The fastest config of the final round (None without one)."""
        return _fastest({key: ms for key, ms in self.final_ms.items() if key != TORCH_KEY})

    def versus_best(self, key: str | None) -> tuple[float | None, str]:
        """(best time / time of ``key``, where from): from the final round when ``key`` is in it (both measured
        side by side), else from the sweep; None when ``key`` has no time."""
        final = self.final_best()
        if final is not None and key is not None and finite_ms(self.final_ms.get(key)):
            return final[1] / self.final_ms[key], "final"
        best = self.best()
        ms = self.configs.get(key) if key is not None else None
        if best is None or not finite_ms(ms):
            return None, "sweep"
        return best[1] / ms, "sweep"  # type: ignore[operator]

    def torch_versus(self, key: str | None) -> float | None:
        """torch.matmul time / time of ``key`` (>1: ours faster); ``key`` None: the oracle best.  Final round
        when it holds both, else the sweep."""
        if key is None:
            best = self.final_best() or self.best()
            key = best[0] if best is not None else None
        torch_final, ours_final = self.final_ms.get(TORCH_KEY), self.final_ms.get(key or "")
        if finite_ms(torch_final) and finite_ms(ours_final):
            return torch_final / ours_final  # type: ignore[operator]
        if key is None or not finite_ms(self.torch_ms) or not finite_ms(self.configs.get(key)):
            return None
        return self.torch_ms / self.configs[key]  # type: ignore[operator]

    def tflops(self, ms: float | None) -> float | None:
        return None if ms is None or ms <= 0 else self.flops / (ms * 1e-3) / 1e12


@dataclass
class Results:
    """A results file: provenance plus one ``ShapeResult`` per shape."""

    device: str
    command: str = ""
    created_utc: str = ""
    profile_fingerprint: str = ""
    profile_path: str = ""
    torch_version: str = ""
    triton_version: str = ""
    theodolite_version: str = ""
    settings: dict[str, Any] = field(default_factory=dict)
    shapes: list[ShapeResult] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["format"] = RESULTS_FORMAT
        data["version"] = RESULTS_VERSION
        return data


def finite_ms(ms: float | None) -> bool:
    """A time that ran: positive and finite (failed configs are None)."""
    return ms is not None and math.isfinite(ms) and ms > 0


def _fastest(times: dict[str, float | None]) -> tuple[str, float] | None:
    timed = [(ms, key) for key, ms in times.items() if finite_ms(ms)]
    if not timed:
        return None
    ms, key = min(timed)  # type: ignore[type-var]
    return key, ms  # type: ignore[return-value]


def save_results(results: Results, path: str | os.PathLike[str]) -> Path:
    """Write atomically (temporary file, then rename): an interrupted sweep never leaves half a file."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        text = json.dumps(results.to_json(), indent=1, allow_nan=False, default=_no_nan)
        with os.fdopen(handle, "wb") as stream:
            # mtime 0: the same results compress to the same bytes (a rewritten sweep diffs only where it changed)
            stream.write(gzip.compress(text.encode(), mtime=0) if target.name.endswith(".gz") else text.encode())
        _make_readable(temporary)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target


def results_stem(path: str | os.PathLike[str]) -> str:
    """A results file's name without ``.json`` or ``.json.gz`` (what its page is named after)."""
    name = Path(path).name
    for suffix in (".json.gz", ".json"):
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return Path(path).stem


def read_json(path: str | os.PathLike[str]) -> Any:
    """The JSON of a results file, plain or gzip-compressed (told by its first bytes, not its name)."""
    raw = Path(path).read_bytes()
    return json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)


def _no_nan(value: Any) -> Any:
    raise TypeError(f"cannot store {type(value).__name__} in a results file")


def load_results(path: str | os.PathLike[str]) -> Results:
    source = Path(path)
    try:
        data = read_json(source)
    except FileNotFoundError:
        raise ResultsError(f"{source}: no such results file") from None
    except (OSError, EOFError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ResultsError(f"{source}: not a readable results file ({error})") from None
    if not isinstance(data, dict) or data.get("format") != RESULTS_FORMAT:
        raise ResultsError(f"{source}: not a theodolite results file (format marker missing)")
    if int(data.get("version", 0)) > RESULTS_VERSION:
        raise ResultsError(f"{source}: results version {data.get('version')} is newer than this theodolite reads")
    try:
        shapes = [ShapeResult(**shape) for shape in data.pop("shapes")]
        data.pop("format")
        data.pop("version")
        return Results(**data, shapes=shapes)
    except (KeyError, TypeError) as error:
        raise ResultsError(f"{source}: malformed results file ({error})") from None


def merge_results(parts: list[Results]) -> Results:
    """Join shards of one sweep (``--shard i/n``) into one file; a later shard wins on a repeated shape."""
    if not parts:
        raise ResultsError("nothing to merge")
    merged = Results(**{**asdict(parts[0]), "shapes": []})
    seen: dict[tuple[Any, ...], ShapeResult] = {}
    for part in parts:
        for shape in part.shapes:
            seen[(shape.name, shape.M, shape.N, shape.K, shape.dtype, shape.layout, shape.batch)] = shape
    merged.shapes = list(seen.values())
    return merged


def _make_readable(path: str) -> None:
    """mkstemp creates files readable by the owner only; give the result the usual umask permissions."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, 0o666 & ~umask)
