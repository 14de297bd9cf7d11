"""``theodolite bench``: time every legal kernel config against torch.matmul per shape; results JSON + table.

Example: ``python -m theodolite bench --shapes llm --dtype bf16 -o reports/results/bench-h100-bf16.json``.
``--shard i/n`` (i from 0) times shapes i, i+n, i+2n, ...; ``merge_results`` joins the shards.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from theodolite.errors import TheodoliteError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--shapes", default="llm", help="llm, random-dev, square, random:N:SEED or a CSV path")
    parser.add_argument("--dtype", default="bf16", choices=["fp16", "bf16", "tf32", "fp32", "fp8e4m3", "fp8e5m2"])
    parser.add_argument("--layout", default="nn", choices=["nn", "nt", "tn", "tt"])
    parser.add_argument("--variants", nargs="+", help="kernel variants (default: all)")
    parser.add_argument("--config", action="append", default=[], help="time only this config key (repeatable)")
    parser.add_argument("--shard", help="i/n: time every n-th shape starting at i (0-based)")
    parser.add_argument("--limit", type=int, help="only the first N shapes (after sharding)")
    parser.add_argument("--budget-s", type=float, help="stop starting new shapes after this many seconds")
    parser.add_argument("--rep-ms", type=float, default=8.0, help="timed milliseconds per config (bounded reps)")
    parser.add_argument("--max-reps", type=int, default=50)
    parser.add_argument("--no-precompile", action="store_true", help="compile lazily instead of in parallel first")
    parser.add_argument("--workers", type=int, default=0, help="precompile processes (default: CPUs - 1, at most 16)")
    parser.add_argument("--profile", help="profile path (default: the resolved one, else the H100 datasheet)")
    parser.add_argument("-o", "--output", type=Path, help="results JSON (written after every shape)")
    parser.add_argument("--resume", action="store_true", help="keep the shapes already in --output and time the rest")
    parser.add_argument(
        "--fast-launch",
        action="store_true",
        help="kept for old command lines: direct relaunch of compiled kernels is now the default",
    )
    parser.add_argument(
        "--no-fast-launch",
        action="store_true",
        help="launch through Triton's binder every time (THEODOLITE_FAST_LAUNCH=0; the old, slower host path)",
    )
    parser.add_argument(
        "--flush-only",
        action="store_true",
        help="time every shape with L2-flushed single runs (no rotated back-to-back timing for small inputs)",
    )


def _shard(shapes: list, spec: str | None) -> list:
    if not spec:
        return shapes
    try:
        index, count = (int(x) for x in spec.split("/"))
        if not 0 <= index < count:
            raise ValueError
    except ValueError:
        raise TheodoliteError(f"--shard must be i/n with 0 <= i < n, got {spec!r}") from None
    return shapes[index::count]


def run(args: argparse.Namespace) -> int:
    from theodolite.kernels.benchmark import BenchSettings, print_table, run_bench, summary
    from theodolite.kernels.config import VARIANTS, GemmConfig
    from theodolite.kernels.shapes import load_suite

    for variant in args.variants or ():
        if variant not in VARIANTS:
            raise TheodoliteError(f"unknown variant {variant!r}; expected one of {', '.join(VARIANTS)}")
    for key in args.config:
        GemmConfig.from_key(key)
    if args.no_fast_launch:
        os.environ["THEODOLITE_FAST_LAUNCH"] = "0"
    shapes = _shard(load_suite(args.shapes), args.shard)
    if args.limit is not None:
        shapes = shapes[: args.limit]
    settings = BenchSettings(
        dtype=args.dtype,
        layout=args.layout,
        variants=tuple(args.variants) if args.variants else None,
        config_keys=tuple(args.config),
        rep_ms=args.rep_ms,
        max_reps=args.max_reps,
        budget_s=args.budget_s,
        precompile=not args.no_precompile,
        workers=args.workers,
        rotate=not args.flush_only,
        extra={"shapes": args.shapes, "shard": args.shard or "", "fast_launch": not args.no_fast_launch},
    )
    command = "theodolite " + " ".join(sys.argv[1:]) if sys.argv and "bench" in sys.argv else "theodolite bench"
    resume = args.output if args.resume else None
    results = run_bench(shapes, settings, args.output, args.profile, command=command, resume=resume)
    print_table(results)
    stats = summary(results)
    if args.output:
        print(f"wrote {args.output} ({stats.get('shapes', 0)} shapes)")
    return 0
