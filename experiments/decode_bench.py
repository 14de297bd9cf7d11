"""Decode GEMMs on one GPU: torch vs the decode family vs the base space's best, and the weights' read bandwidth.

The nn.Linear layout (``y = x @ W.t()``, W [N, K] row-major) for M in 1, 2, 4, 8, 16, 32, 64 against the distinct
weights (N, K) of kernels/shapes/llm.csv, bf16.  First each decode config's output is checked against an fp32
reference on a few shapes; then per shape, in interleaved rounds with the L2 flushed before every run (CUDA events
around the kernel only; ``kernels.benchmark.Timer``'s read flush): ``F.linear``, the model's pick, every legal decode
config, the model's four best other configs, and a plain read of the weight's bytes (the HBM probe's read kernel).  The
weights' achieved read bandwidth (N K bytes / time) is set against the profile's hbm_read_bandwidth, as measured and
within a stream of work (less the flushed bracket, ``kernels.benchmark.timing_floors``), and the best config's time
against the plain read's.  Writes $OUT/decode_bench.json (or --out) and prints a per-M summary table last.

    PYTHONPATH=$PWD python3 experiments/decode_bench.py            # ~3-5 min on an H100 (compiles included)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from theodolite.kernels import gemm
from theodolite.kernels.benchmark import Timer, timing_floors
from theodolite.kernels.build import precompile
from theodolite.kernels.config import GemmConfig, KernelLimits, Problem, is_decode, legal_configs
from theodolite.kernels.shapes import load_suite
from theodolite.model.predict import rank

from theodolite.profile.hdf5 import load_profile

ROOT = Path(__file__).resolve().parents[1]
M_VALUES = (1, 2, 4, 8, 16, 32, 64)
BASE_TOP = 4  # the model's best configs outside the family, timed beside it


def bundled_profile() -> Path:
    name = torch.cuda.get_device_name()
    return ROOT / "profiles" / ("nvidia-h200.h5" if "H200" in name else "nvidia-h100-80gb-hbm3.h5")


def weights_of_suite() -> list[tuple[int, int]]:
    return sorted({(n, k) for _, _, n, k in load_suite("llm")})


def timed(fns: list, timer: Timer) -> list[float]:
    """Median microseconds of each fn over interleaved rounds, the L2 flushed (read) before every run."""
    for fn in fns:
        fn()
    torch.cuda.synchronize()
    return [ms * 1e3 for ms in timer.flushed_interleaved(fns)]


def check_correctness(configs: list[GemmConfig], limits: KernelLimits, profile) -> list[dict]:  # type: ignore[no-untyped-def]
    """Each decode config on a few decode shapes (ragged N and K included) against an fp32 reference."""
    rows = []
    for m, n, k in [(1, 4096, 4096), (7, 1000, 3000), (64, 6144, 4096), (33, 2052, 8200)]:
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) / math.sqrt(k)
        ref = x.float() @ w.float().t()
        problem = Problem(m, n, k, dtype="bf16", layout="nt")
        for config in configs:
            if config not in legal_configs(problem, limits, profile):
                continue
            out = gemm(x, w.t(), config)
            err = ((out.float() - ref).abs().max() / ref.abs().max()).item()
            rows.append({"shape": [m, n, k], "config": config.key, "rel_err": err, "ok": bool(err < 2e-2)})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default=None, help="profile file (default: the bundled one of this GPU)")
    parser.add_argument("--budget-s", type=float, default=300.0, help="stop timing new shapes after this long")
    parser.add_argument("--out", default=None, help="JSON file (default $OUT/decode_bench.json)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    begin = time.time()
    profile = load_profile(args.profile or bundled_profile())
    from theodolite.kernels.launch import device_limits

    limits = device_limits(torch.device("cuda"))
    hbm = profile.value("hbm_read_bandwidth")
    shapes = [(m, n, k) for n, k in weights_of_suite() for m in M_VALUES]
    # the configs to time per shape: the family's legal ones and the model's best others (its pick among them)
    plan: dict[tuple[int, int, int], tuple[str, list[GemmConfig]]] = {}
    for m, n, k in shapes:
        problem = Problem(m, n, k, dtype="bf16", layout="nt")
        ranked = rank(problem, profile)
        family = [p.config for p in ranked if is_decode(p.config, "bf16")]
        others = [p.config for p in ranked if not is_decode(p.config, "bf16")][:BASE_TOP]
        plan[(m, n, k)] = (ranked[0].key, family + others)
    configs = sorted({c for _, cs in plan.values() for c in cs})
    errors = precompile([(c, Problem(2, 512, 4096, dtype="bf16", layout="nt")) for c in configs], workers=16)
    for error in errors:
        print("precompile:", error)
    print(f"{len(configs)} configs compiled in {time.time() - begin:.0f}s")
    family_all = [c for c in configs if is_decode(c, "bf16")]
    checks = check_correctness(family_all, limits, profile)
    bad = [c for c in checks if not c["ok"]]
    print(f"correctness: {len(checks) - len(bad)}/{len(checks)} ok" + "".join(f"\n  BAD {c}" for c in bad))

    from theodolite.probes.stream import StreamVariant, launch_stream

    timer = Timer()
    floor = timing_floors(timer)
    bracket_us = (floor["flushed_ms"] - floor["graph_ms"]) * 1e3
    read = StreamVariant(block=1024, warps=4)
    sink = torch.empty(read.block, device="cuda")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"empty kernel {floor['flushed_ms'] * 1e3:.2f} µs flushed, {floor['graph_ms'] * 1e3:.2f} per call in graphs")
    results = []
    for n, k in weights_of_suite():
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) / math.sqrt(k)
        for m in M_VALUES:
            if time.time() - begin > args.budget_s:
                break
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            pick, cands = plan[(m, n, k)]
            words = w.view(torch.float32)  # the read kernel loads float32 words: every byte of the weight once
            stream = [lambda words=words: launch_stream("read", read, sms, words, None, sink, words.numel() * 4)]
            fns = stream + [lambda x=x, w=w: F.linear(x, w)] + [lambda c=c, x=x, w=w: gemm(x, w.t(), c) for c in cands]
            times = timed(fns, timer)
            stream_us, torch_us = times[0], times[1]
            per = dict(zip((c.key for c in cands), times[2:], strict=True))
            fam = {key: t for key, t in per.items() if is_decode(GemmConfig.from_key(key), "bf16")}
            base = {key: t for key, t in per.items() if key not in fam}
            best_key = min(per, key=per.__getitem__)
            row = {
                "m": m, "n": n, "k": k, "weight_bytes": 2 * n * k, "torch_us": torch_us, "times_us": per,
                "pick": pick, "pick_us": per.get(pick), "best": best_key, "best_us": per[best_key],
                "best_family": min(fam, key=fam.__getitem__) if fam else None,
                "best_family_us": min(fam.values()) if fam else None,
                "best_base_us": min(base.values()) if base else None,
                "torch_over_best": torch_us / per[best_key],
                "torch_over_pick": torch_us / per[pick] if pick in per else None,
                "best_hbm_fraction": 2 * n * k / (per[best_key] * 1e-6) / hbm,
                "torch_hbm_fraction": 2 * n * k / (torch_us * 1e-6) / hbm,
                "best_hbm_fraction_in_stream": 2 * n * k / ((per[best_key] - bracket_us) * 1e-6) / hbm,
                "read_us": stream_us, "best_over_read": per[best_key] / stream_us,
            }  # fmt: skip
            results.append(row)
            print(
                f"{m:>3}x{n:>6}x{k:>5}  torch {torch_us:8.1f}  best {per[best_key]:8.1f} ({best_key})  "
                f"family {row['best_family_us'] or 0:8.1f}  base {row['best_base_us'] or 0:8.1f}  "
                f"pick {row['pick_us'] or 0:8.1f}  read {stream_us:8.1f}  best/hbm {row['best_hbm_fraction']:.2f}",
                flush=True,
            )
        del w
    out = Path(args.out) if args.out else Path(os.environ.get("OUT", ".")) / "decode_bench.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    meta = {"device": torch.cuda.get_device_name(), "profile": profile.origin, "hbm_read_bandwidth": hbm,
            "torch": torch.__version__, "timing_floor": floor, "seconds": time.time() - begin}  # fmt: skip
    out.write_text(json.dumps({"meta": meta, "correctness": checks, "shapes": results}, indent=1))

    def geo(values: list[float]) -> float:
        return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")

    print(f"\n{meta['device']}, bf16 nt (x @ W.t()), {len(results)} shapes; torch time / ours (>1: ours faster)")
    print(f"{'M':>3} {'best geo':>8} {'best min':>8} {'pick geo':>8} {'pick min':>8} {'fam/base':>8} {'hbm best':>8}"
          f" {'in strm':>8} {'/read':>6}")  # fmt: skip
    for m in (*M_VALUES, None):
        rows = [r for r in results if m is None or r["m"] == m]
        if not rows:
            continue
        best = [r["torch_over_best"] for r in rows]
        pick = [r["torch_over_pick"] for r in rows if r["torch_over_pick"]]
        fam = [r["best_base_us"] / r["best_family_us"] for r in rows if r["best_family_us"] and r["best_base_us"]]
        hbm_median = statistics.median(r["best_hbm_fraction"] for r in rows)
        in_stream = statistics.median(r["best_hbm_fraction_in_stream"] for r in rows)
        over_read = geo([r["best_over_read"] for r in rows])
        print(
            f"{'all' if m is None else m:>3} {geo(best):8.3f} {min(best):8.3f} {geo(pick):8.3f} "
            f"{min(pick, default=float('nan')):8.3f} {geo(fam):8.3f} {hbm_median:8.2f} {in_stream:8.2f}"
            f" {over_read:6.2f}"
        )
    print(f"JSON: {out}")
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
