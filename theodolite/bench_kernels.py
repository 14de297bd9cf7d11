"""Per-projection GPU kernel times of the bench-linear decoder: ``F.linear`` (cuBLAS) against theodolite's pick and
the model's next-ranked bundled configs.

A pass that loses to torch is traced to the projection and M that lose, and the loss is told apart: the model
picked a slower bundled config than one it ranked just behind (a pick to fix), or none of its top candidates
reaches cuBLAS (a config the bundle lacks).  Each time is one CUDA graph of one call per layer (each layer's own
weight, so small-M calls read their weights from memory as the pass does, not from L2), replayed and divided.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from theodolite import ops

CANDIDATE_MS = (32, 128, 512)


def graph_us_per_call(calls: Sequence[Callable[[], Any]], replays: int = 5) -> float:
    """GPU microseconds per call: ``calls`` captured in one CUDA graph (after a warm-up that compiles and fills
    caches), replayed ``replays`` times, the median replay divided by the number of calls."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for call in calls:
            call()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for call in calls:
            call()
    graph.replay()
    samples = []
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1e3 / len(calls))
    del graph
    return statistics.median(samples)


def candidates(x: Tensor, w: Tensor, top: int) -> list[tuple[Any, float, bool]]:
    """(config, predicted us, is the pick) for ``F.linear(x, w)`` (layout nt): the pick (what
    ``theodolite.ops.linear`` runs), the model's next ``top - 1`` ranked configs, then the best-ranked config of
    each kernel variant (tma, persistent, stream-K, split-K, ...) not among them, so a family ranked too low is
    timed too."""
    from theodolite import api
    from theodolite.kernels.launch import problem_of
    from theodolite.model.predict import rank

    problem = problem_of(x, w.t(), None, ops._fp32_precision(x.dtype))
    pick = api.select_problem(problem).config
    ranked = rank(problem, api.resolve(None))
    others = [p for p in ranked if p.config != pick]
    chosen = [(pick, next((p.time_s for p in ranked if p.config == pick), math.nan) * 1e6, True)]
    chosen += [(p.config, p.time_s * 1e6, False) for p in others[: max(0, top - 1)]]
    variants = {c.variant for c, _, _ in chosen}
    for p in others:
        if p.config.variant not in variants:
            variants.add(p.config.variant)
            chosen.append((p.config, p.time_s * 1e6, False))
    return chosen


def verdict(torch_us: float, pick_us: float, best_us: float | None) -> str:
    """``wins``: the pick is at least as fast as torch; ``pick``: a ranked candidate beats torch where the pick does
    not (the model's choice loses); ``bundle``: no timed candidate reaches torch (a config the bundle lacks);
    ``untimed``: the pick loses and no candidate was timed."""
    if pick_us <= torch_us:
        return "wins"
    if best_us is None:
        return "untimed"
    return "pick" if best_us <= torch_us else "bundle"


def projection_times(
    weights: list[list[Tensor]],
    projections: Sequence[tuple[str, int, int]],
    ms: Sequence[int],
    candidate_ms: Sequence[int] = CANDIDATE_MS,
    top: int = 4,
    budget_s: float = 120.0,
    progress: Callable[[str], None] = print,
) -> list[dict[str, Any]]:
    """One row per (M, projection): torch's and theodolite's GPU us per call, and for M in ``candidate_ms`` the
    model's ``top`` candidates run through ``kernels.launch.gemm`` (the pick among them), with the verdict.  Timing
    candidates stops once ``budget_s`` is spent (first compiles are slow); rows say which were skipped."""
    from theodolite import api
    from theodolite.kernels.launch import gemm

    device, dtype = weights[0][0].device, weights[0][0].dtype
    sms = int(api.resolve(None).value("sm_count"))
    start = time.perf_counter()
    rows: list[dict[str, Any]] = []
    for m in ms:
        for p, (name, k, n) in enumerate(projections):
            x = torch.randn(m, k, device=device, dtype=dtype)
            ws = [layer[p] for layer in weights]
            row: dict[str, Any] = {"m": m, "projection": name, "n": n, "k": k}
            row["torch_us"] = graph_us_per_call([partial(F.linear, x, w) for w in ws])
            row["theodolite_us"] = graph_us_per_call([partial(ops.linear, x, w) for w in ws])
            ranked = candidates(x, ws[0], top)
            row["pick"], row["pick_predicted_us"] = ranked[0][0].key, ranked[0][1]
            row["candidates"] = []
            if m in candidate_ms:
                for config, predicted, is_pick in ranked:
                    entry: dict[str, Any] = {"key": config.key, "predicted_us": predicted, "pick": is_pick}
                    if time.perf_counter() - start > budget_s:
                        entry["skipped"] = "time budget spent"
                    else:
                        try:
                            entry["us"] = graph_us_per_call([partial(gemm, x, w.t(), config, num_sms=sms) for w in ws])
                        except Exception as error:  # noqa: BLE001 - a config that fails to build is a result too
                            entry["error"] = f"{type(error).__name__}: {error}"[:300]
                    row["candidates"].append(entry)
            timed = [c for c in row["candidates"] if "us" in c]
            best = min(timed, key=lambda c: c["us"]) if timed else None
            row["best_key"], row["best_us"] = (best["key"], best["us"]) if best else (None, None)
            row["ratio"] = row["torch_us"] / row["theodolite_us"]
            row["verdict"] = verdict(row["torch_us"], row["theodolite_us"], row["best_us"])
            rows.append(row)
            best_text = f", best {row['best_key']} {row['best_us']:.1f}" if best else ""
            progress(f"M={m} {name}: torch {row['torch_us']:.1f} us, theodolite {row['theodolite_us']:.1f} us "
                     f"({row['pick']}){best_text}: {row['verdict']}")  # fmt: skip
    return rows


def table(rows: Sequence[dict[str, Any]]) -> str:
    """The losing (M, projection) pairs: torch / theodolite us, the pick, the best timed candidate, the verdict."""
    losing = [r for r in rows if r["verdict"] != "wins"]
    lines = [f"per-projection GPU us per call: {len(losing)} of {len(rows)} (M, projection) lose to torch"]
    for r in losing:
        best = f"{r['best_key']} {r['best_us']:.1f}" if r["best_us"] is not None else "-"
        lines.append(f"  M={r['m']:>5} {r['projection']:<8} torch {r['torch_us']:7.1f} theodolite "
                     f"{r['theodolite_us']:7.1f} ({r['ratio']:.2f}x) pick {r['pick']} best {best}: "
                     f"{r['verdict']}")  # fmt: skip
    return "\n".join(lines)


__all__ = ["CANDIDATE_MS", "candidates", "graph_us_per_call", "projection_times", "table", "verdict"]
