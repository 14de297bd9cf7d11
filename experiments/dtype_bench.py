"""fp8, fp16 and tf32 on one GPU against torch, side by side: picks, a bounded exhaustive best, host and GPU time.

Four parts, each shape's candidates timed side by side in one interleaved set (``kernels.benchmark``'s protocol:
warm-up, random data, a checked NaN-poisoned run, then rounds of CUDA-graph replays over input copies rotated
through L2, or L2-flushed runs with CUDA events for inputs too large to rotate; kernel time only):

(a) fp8 e4m3, llm.csv, layout nt (B = ``w.t()`` of an ``[N, K]`` weight): ``torch._scaled_mm`` (its default and
    ``use_fast_accum=True``: Triton's fp8 dot on sm_90 accumulates the fast way, so the second is like for like),
    ``theodolite.matmul`` with two per-tensor scale tensors (the public call, its scales' multiply included), the
    model's pick and a bounded candidate set (the model's 6 best, its best per variant, its best tile under 64 rows
    and its best of 64 rows or more; ``best`` is the fastest of those, not of the whole space).  For M <= 512 also
    the per-call wall time of eager back-to-back calls (host included) and the host's time to issue one call.
(b) fp8 e4m3 decode: M in 1, 16, 64 against each distinct llm.csv weight, nt, as (a), plus the weight's read
    bandwidth (N K bytes / time) against the profile's ``hbm_read_bandwidth``.
(c) fp16 and tf32, llm.csv, nt: the pick against ``torch.matmul`` (allow_tf32 for tf32).
(d) fp8 e5m2, a few llm.csv shapes, nt: the pick's error against the exact product of the dequantized inputs and
    its time against the mixed e5m2 x e4m3 ``torch._scaled_mm`` (torch refuses e5m2 x e5m2).

Shapes are subsampled deterministically to fit ~8 minutes on an H100 (compiles included, done first in worker
processes): (a) every 3rd llm.csv row, (c) every 6th, (d) every 16th; each part stops at its time budget and lists
the shapes it left out.  Writes $OUT/dtype_bench-<gpu>.json and prints a summary table last.

    PYTHONPATH=$PWD python3 experiments/dtype_bench.py [--budget-scale 1.0]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
from harness import gpu_name, in_workers  # noqa: E402
from theodolite.kernels.benchmark import (  # noqa: E402
    WRONG_RESULT,
    Timer,
    _checked_plan,
    _max_rel_error,
    _our_calls,
    _shape_inputs,
    _WrongResult,
    make_inputs,
    scaled_mm_operand,
)
from theodolite.kernels.build import specialization  # noqa: E402
from theodolite.kernels.config import GemmConfig, Problem, is_decode  # noqa: E402
from theodolite.kernels.launch import _FAST, _fast_key, gemm, plan_gemm  # noqa: E402
from theodolite.kernels.shapes import load_suite  # noqa: E402
from theodolite.model.predict import rank  # noqa: E402

import theodolite  # noqa: E402
from theodolite.profile import load as load_profile  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TOP = 6  # the model's best configs timed beside its pick
DECODE_M = (1, 16, 64)
HOST_MAX_M = 512  # eager wall and host time for shapes up to this M (where the host can matter)
BUDGET_S = {"a": 150.0, "b": 80.0, "c": 70.0, "d": 20.0}  # timing seconds per part, after the compiles
FLUSHED_BUDGET_MS = 500.0
OUT_TORCH = {"fp8e4m3": torch.bfloat16, "fp8e5m2": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32}


def bundled_profile() -> Path:
    name = torch.cuda.get_device_name()
    return ROOT / "profiles" / ("nvidia-h200.h5" if "H200" in name else "nvidia-h100-80gb-hbm3.h5")


def candidates(problem: Problem, profile: Any, pick: str) -> list[str]:
    """The pick, the model's TOP best, its best per variant, best tile under 64 rows and best of 64 rows or more
    (the asynchronous wgmma path; smaller tiles run fp8 as fp16 mma.sync after a conversion on sm_90)."""
    ranked = [p.config for p in rank(problem, profile)]
    keys = [pick] + [c.key for c in ranked[:TOP]]
    firsts: dict[Any, str] = {}
    for c in ranked:
        for group in (c.variant, c.block_m >= 64, ("decode", is_decode(c, problem.dtype))):
            firsts.setdefault(group, c.key)
    return list(dict.fromkeys(keys + list(firsts.values())))


def warm(tasks: list[tuple[int, int, int, str, str, str, bool]]) -> int:
    """Compile (run once) each (M, N, K, dtype, layout, config, scaled) in this process; M is cut to 256 (the binary
    does not depend on it beyond M = 1).  ``scaled``: with two scale tensors (the epilogue's scale load)."""
    device = torch.device("cuda")
    done = 0
    for m, n, k, dtype, layout, key, scaled in tasks:
        a, b = make_inputs(min(m, 256), n, k, dtype, layout, device)
        one = torch.ones(1, device=device) if scaled else None
        try:
            plan_gemm(a, b, GemmConfig.from_key(key), a_scale=one, b_scale=one).run()
            done += 1
        except Exception as error:  # noqa: BLE001 - said, then timed (and reported) in the main process
            print("warm", m, n, k, dtype, key, type(error).__name__, str(error)[:120], flush=True)
        del a, b
        torch.cuda.empty_cache()
    torch.cuda.synchronize()
    return done


def host_us(fn: Callable[[], Any], calls: int = 64) -> float:
    """Host microseconds to issue one call (the GPU's queue does not fill in ``calls`` calls)."""
    fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    host = (time.perf_counter() - start) / calls * 1e6
    torch.cuda.synchronize()
    return host


def measure(
    name: str, m: int, n: int, k: int, dtype: str, keys: list[str], pick: str, timer: Timer, profile_path: Path
) -> dict[str, Any]:
    """One shape: torch's calls, (fp8) the public call with scales, and the configs ``keys``, side by side."""
    row: dict[str, Any] = {"shape": name, "M": m, "N": n, "K": k, "dtype": dtype, "layout": "nt", "pick": pick}
    inputs = _shape_inputs(m, n, k, dtype, "nt", timer, rotate=True)
    fp8 = dtype.startswith("fp8")
    errors: dict[str, str] = {}
    rel: dict[str, float] = {}
    rotated = inputs.sets if inputs.rotation else inputs.sets[:1]
    one = torch.ones(1, device="cuda", dtype=torch.float32)
    baselines: list[tuple[str, list[Callable[[], Any]]]] = [("torch", inputs.torch_fns[: len(rotated)])]
    if fp8:
        out_torch = OUT_TORCH[dtype]

        def fast(x: torch.Tensor, y: torch.Tensor) -> Callable[[], Any]:
            y_col = scaled_mm_operand(x, y).t().contiguous().t()
            return lambda: torch._scaled_mm(
                x, y_col, scale_a=one, scale_b=one, out_dtype=out_torch, use_fast_accum=True
            )

        def api(x: torch.Tensor, y: torch.Tensor, o: torch.Tensor) -> Callable[[], Any]:
            return lambda: theodolite.matmul(x, y, out=o, scale_a=one, scale_b=one, profile=profile_path)

        baselines.append(("torch_fast_accum", [fast(x, y) for x, y, _, _ in rotated]))
        baselines.append(("api_scaled", [api(x, y, o) for x, y, _, o in rotated]))
    names: list[str] = []
    fns: list[list[Callable[[], Any]]] = []
    for label, calls in baselines:
        try:
            out = calls[0]()
            torch.cuda.synchronize()
            if fp8:  # (fp16/tf32: torch's output is the reference itself)
                rel[label] = _max_rel_error(out, inputs.ref)
                if label == "api_scaled" and not rel[label] <= WRONG_RESULT[dtype]:
                    raise _WrongResult(f"wrong result: max_rel_error={rel[label]}")
            names.append(label)
            fns.append(calls)
        except Exception as error:  # noqa: BLE001 - a call that cannot run is reported, not fatal
            errors[label] = f"{type(error).__name__}: {str(error)[:200]}"
            torch.cuda.synchronize()
    for key in keys:
        try:
            config = GemmConfig.from_key(key)
            plan, _, error = _checked_plan(inputs, config)
            rel[key] = error
            calls = (
                _our_calls(inputs.sets, config, inputs.precision, gemm, plan_gemm, _FAST, _fast_key)
                if inputs.rotation
                else [plan.run]
            )
            names.append(key)
            fns.append(calls)
        except _WrongResult as wrong:
            errors[key] = str(wrong)
        except Exception as failure:  # noqa: BLE001
            errors[key] = f"{type(failure).__name__}: {str(failure)[:200]}"
            torch.cuda.synchronize()
    if inputs.rotation:
        times = timer.interleaved(fns, keep=range(len(fns)), batches=9)
        row["timing"] = timer.last_mode
    else:
        times = timer.flushed_interleaved([f[0] for f in fns], FLUSHED_BUDGET_MS)
        row["timing"] = "flushed"
    ms = dict(zip(names, times, strict=True))
    row.update(ms=ms, errors=errors, max_rel_error=rel, rotation=inputs.rotation)
    timed_keys = [key for key in keys if key in ms]
    if timed_keys:
        best = min(timed_keys, key=lambda key: ms[key])
        row.update(best=best, best_ms=ms[best])
    row["pick_ms"] = ms.get(pick)
    if fp8 and m <= HOST_MAX_M and "api_scaled" in ms and "torch" in ms:
        api, base = fns[names.index("api_scaled")][0], fns[names.index("torch")][0]
        eager = timer.eager_batches([[api], [base]], keep=(0, 1), batches=3)
        row["eager_ms"] = {"api_scaled": eager[0], "torch": eager[1]}
        row["host_us"] = {"api_scaled": host_us(api), "torch": host_us(base)}
    del inputs
    torch.cuda.empty_cache()
    return row


def geomean(values: list[float]) -> float:
    values = [v for v in values if v and math.isfinite(v) and v > 0]
    return math.exp(statistics.fmean(math.log(v) for v in values)) if values else math.nan


def ratio(row: dict[str, Any], base: str, ours: str) -> float:
    """base time / ours time (> 1: ours faster); NaN where either is missing."""
    ms = row.get("ms", {})
    b, o = ms.get(base), (row.get(ours) if ours.endswith("_ms") else ms.get(ours))
    return b / o if b and o else math.nan


def part_summary(rows: list[dict[str, Any]], base: str) -> dict[str, Any]:
    best = [ratio(r, base, "best_ms") for r in rows]
    pick = [ratio(r, base, "pick_ms") for r in rows]
    eff = [r["best_ms"] / r["pick_ms"] for r in rows if r.get("best_ms") and r.get("pick_ms")]
    summary = {
        "shapes": len(rows),
        f"best_vs_{base}_geomean": geomean(best),
        f"best_vs_{base}_min": min((v for v in best if math.isfinite(v)), default=math.nan),
        f"pick_vs_{base}_geomean": geomean(pick),
        f"pick_vs_{base}_min": min((v for v in pick if math.isfinite(v)), default=math.nan),
        "selection_efficiency_geomean": geomean(eff),
        "selection_efficiency_min": min(eff, default=math.nan),
        "failed_configs": sum(len([e for e in r["errors"] if "/" in e or e in ("shape", "api_scaled")]) for r in rows),
    }
    if base == "torch" and any("torch_fast_accum" in r.get("ms", {}) for r in rows):
        summary["best_vs_fast_accum_geomean"] = geomean([ratio(r, "torch_fast_accum", "best_ms") for r in rows])
        summary["best_vs_fast_accum_min"] = min(
            (v for v in (ratio(r, "torch_fast_accum", "best_ms") for r in rows) if math.isfinite(v)), default=math.nan
        )
        summary["api_scaled_vs_torch_geomean"] = geomean([ratio(r, "torch", "api_scaled") for r in rows])
        eager = [r["eager_ms"]["torch"] / r["eager_ms"]["api_scaled"] for r in rows if "eager_ms" in r]
        summary["eager_api_vs_torch_geomean"] = geomean(eager)
        hosts = [r["host_us"]["api_scaled"] for r in rows if "host_us" in r]
        summary["host_us_api_median"] = statistics.median(hosts) if hosts else math.nan
        torch_hosts = [r["host_us"]["torch"] for r in rows if "host_us" in r]
        summary["host_us_torch_median"] = statistics.median(torch_hosts) if torch_hosts else math.nan
    return summary


def run_part(
    label: str, shapes: list[tuple[str, int, int, int]], dtype: str, plan: dict[tuple[str, str], tuple[str, list[str]]],
    timer: Timer, profile_path: Path, budget_s: float, extra: Callable[[dict[str, Any]], None] | None = None,
) -> tuple[list[dict[str, Any]], list[str]]:  # fmt: skip
    rows: list[dict[str, Any]] = []
    skipped: list[str] = []
    start = time.perf_counter()
    for i, (name, m, n, k) in enumerate(shapes):
        if time.perf_counter() - start > budget_s:
            skipped.extend(f"{s[0]} {s[1]}x{s[2]}x{s[3]}" for s in shapes[i:])
            print(f"[{label}] budget of {budget_s:.0f} s spent: {len(shapes) - i} shapes left out", flush=True)
            break
        pick, keys = plan[(dtype, f"{name} {m}x{n}x{k}")]
        t0 = time.perf_counter()
        try:
            row = measure(name, m, n, k, dtype, keys, pick, timer, profile_path)
        except Exception as error:  # noqa: BLE001 - a shape that fails is a result
            row = {"shape": name, "M": m, "N": n, "K": k, "dtype": dtype, "pick": pick, "ms": {},
                   "errors": {"shape": f"{type(error).__name__}: {str(error)[:300]}"}}  # fmt: skip
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        if extra is not None:
            extra(row)
        rows.append(row)
        base = row["ms"].get("torch")
        print(
            f"[{label}] {i + 1}/{len(shapes)} {name} {m}x{n}x{k} {dtype}: torch {base or math.nan:.4f} ms, "
            f"pick {row.get('pick_ms') or math.nan:.4f} ({pick}), best {row.get('best_ms') or math.nan:.4f} "
            f"({row.get('best')}), fast-accum {row['ms'].get('torch_fast_accum') or math.nan:.4f}, "
            f"api {row['ms'].get('api_scaled') or math.nan:.4f}; {len(row['errors'])} errors; "
            f"{time.perf_counter() - t0:.1f} s",
            flush=True,
        )
    return rows, skipped


Parts = dict[str, tuple[list[tuple[str, int, int, int]], list[str]]]
Plan = dict[tuple[str, str], tuple[str, list[str]]]


def plan_parts(profile_path: Path, profile: Any) -> tuple[Parts, Plan, list[tuple[int, int, int, str, str, str, bool]]]:
    """The shapes of each part, each shape's pick and candidates (host only), and one warm task per binary."""
    llm = load_suite("llm")
    parts: dict[str, tuple[list[tuple[str, int, int, int]], list[str]]] = {
        "a": ([s for i, s in enumerate(llm) if i % 3 == 0], ["fp8e4m3"]),
        "b": (
            [(f"{w}.m{m}", m, n, k) for w, n, k in sorted({(s[0], s[2], s[3]) for s in llm}) for m in DECODE_M],
            ["fp8e4m3"],
        ),
        "c": ([s for i, s in enumerate(llm) if i % 6 == 0], ["fp16", "tf32"]),
        "d": ([s for i, s in enumerate(llm) if i % 16 == 0], ["fp8e5m2"]),
    }
    # the model's picks and candidates (host only), then every binary compiled in worker processes
    plan: dict[tuple[str, str], tuple[str, list[str]]] = {}
    tasks: dict[tuple[Any, ...], tuple[int, int, int, str, str, str, bool]] = {}
    for label, (shapes, dtypes) in parts.items():
        for dtype in dtypes:
            for name, m, n, k in shapes:
                pick = theodolite.select(m, n, k, dtype=dtype, layout="nt", profile=profile_path).config.key
                keys = (
                    candidates(Problem(m, n, k, dtype=dtype, layout="nt"), profile, pick) if label in "ab" else [pick]
                )
                plan[(dtype, f"{name} {m}x{n}x{k}")] = (pick, keys)
                # one task per binary: sizes are not specialized, the load widths, M = 1 and N's vector are
                spec = specialization(Problem(m, n, k, dtype=dtype, layout="nt"))
                warm_m = m if m <= 64 else 256  # decode tiles are legal only for M <= 64
                for key, scaled in [(key, False) for key in keys] + ([(pick, True)] if dtype.startswith("fp8") else []):
                    tasks.setdefault((dtype, key, spec, scaled), (warm_m, n, k, dtype, "nt", key, scaled))
    return parts, plan, sorted(tasks.values())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--budget-scale", type=float, default=1.0, help="scale every part's time budget")
    parser.add_argument("--workers", type=int, default=12)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("needs a CUDA GPU")
        return 1
    wall = time.perf_counter()
    profile_path = bundled_profile()
    profile = load_profile(profile_path)
    hbm = float(profile.value("hbm_read_bandwidth"))
    parts, plan, tasks = plan_parts(profile_path, profile)
    print(f"{len(plan)} shapes planned, {len(tasks)} binaries to warm with {args.workers} workers", flush=True)
    t0 = time.perf_counter()
    done = sum(in_workers(warm, tasks, workers=args.workers))
    compile_s = time.perf_counter() - t0
    print(f"warmed {done}/{len(tasks)} in {compile_s:.0f} s", flush=True)

    timer = Timer()
    results: dict[str, Any] = {"gpu": torch.cuda.get_device_name(), "profile": profile_path.name,
                               "torch": torch.__version__, "compile_s": compile_s, "parts": {}}  # fmt: skip

    def bandwidth(row: dict[str, Any]) -> None:
        weight = row["N"] * row["K"]  # fp8: one byte an element
        for key in ("best_ms", "pick_ms"):
            if row.get(key):
                row[key.replace("_ms", "_hbm_fraction")] = weight / (row[key] * 1e-3) / hbm
        if row["ms"].get("torch"):
            row["torch_hbm_fraction"] = weight / (row["ms"]["torch"] * 1e-3) / hbm

    for label, (shapes, dtypes) in parts.items():
        for dtype in dtypes:
            budget = BUDGET_S[label] * args.budget_scale / len(dtypes)
            rows, skipped = run_part(label, shapes, dtype, plan, timer, profile_path, budget,
                                     bandwidth if label == "b" else None)  # fmt: skip
            summary = part_summary(rows, "torch")
            if label == "b":
                weights = [r for r in rows if r.get("best_hbm_fraction")]
                summary["best_hbm_fraction_median"] = statistics.median(
                    [r["best_hbm_fraction"] for r in weights]) if weights else math.nan  # fmt: skip
                summary["pick_hbm_fraction_min"] = min((r.get("pick_hbm_fraction", math.nan) for r in weights),
                                                       default=math.nan)  # fmt: skip
            if label == "d":
                summary["max_rel_error_pick"] = max(
                    (r["max_rel_error"].get(r["pick"], math.nan) for r in rows if "max_rel_error" in r),
                    default=math.nan,
                )
            results["parts"][f"{label}:{dtype}"] = {"summary": summary, "skipped": skipped, "rows": rows}
            out_dir = Path(os.environ.get("OUT", "."))
            out_dir.mkdir(parents=True, exist_ok=True)
            path = out_dir / f"dtype_bench-{gpu_name()}.json"
            path.write_text(json.dumps(results, indent=1, default=str))  # after every part: a timeout keeps the rest
    results["wall_s"] = time.perf_counter() - wall
    path.write_text(json.dumps(results, indent=1, default=str))

    print(
        f"\n{results['gpu']}, profile {results['profile']}, compiles {compile_s:.0f} s, wall {results['wall_s']:.0f} s"
    )
    print("ratios: torch time / ours (>1 ours faster); best = fastest of the bounded candidate set")
    head = (
        f"{'part':<12} {'n':>3} {'best g':>7} {'best min':>8} {'pick g':>7} {'pick min':>8} {'eff g':>6} "
        f"{'eff min':>7} {'vs fast':>7} {'api g':>6} {'eager g':>7} {'host us':>8} {'torch us':>8} {'fail':>4}"
    )
    print(head)
    for part, data in results["parts"].items():
        s = data["summary"]
        print(
            f"{part:<12} {s['shapes']:>3} {s['best_vs_torch_geomean']:>7.3f} {s['best_vs_torch_min']:>8.3f} "
            f"{s['pick_vs_torch_geomean']:>7.3f} {s['pick_vs_torch_min']:>8.3f} "
            f"{s['selection_efficiency_geomean']:>6.3f} {s['selection_efficiency_min']:>7.3f} "
            f"{s.get('best_vs_fast_accum_geomean', math.nan):>7.3f} "
            f"{s.get('api_scaled_vs_torch_geomean', math.nan):>6.3f} "
            f"{s.get('eager_api_vs_torch_geomean', math.nan):>7.3f} {s.get('host_us_api_median', math.nan):>8.1f} "
            f"{s.get('host_us_torch_median', math.nan):>8.1f} {s['failed_configs']:>4}"
            + (f"  skipped {len(data['skipped'])}" if data["skipped"] else "")
            + (f"  HBM best median {s['best_hbm_fraction_median']:.2f}" if "best_hbm_fraction_median" in s else "")
            + (f"  max err {s['max_rel_error_pick']:.3g}" if "max_rel_error_pick" in s else "")
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
