"""``theodolite bench-linear``: a Llama-3-8B-sized decoder's projections through F.linear and theodolite, side by side
(eager, CUDA graph, torch.compile), with tokens/s and the host cost per call; see ``theodolite.bench_linear``.

Example: ``python -m theodolite bench-linear --out reports/results/bench-linear-h100.json``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from theodolite.errors import TheodoliteError


def _ms(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--ms takes comma-separated integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"--ms needs positive token counts, got {text!r}")
    return values


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, help="results JSON")
    parser.add_argument("--layers", type=int, default=32, help="decoder layers per pass (4 GEMMs each; default 32)")
    parser.add_argument("--ms", type=_ms, default=None, help="token counts M (default 1,8,32,128,512,2048,8192)")
    parser.add_argument("--repeats", type=int, default=7, help="timed passes per side and mode (median)")
    parser.add_argument("--compile-layers", type=int, default=4, help="layers of the torch.compile stack")
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    parser.add_argument("--host-m", type=int, default=8, help="M of the host-time and profiler measurements")
    parser.add_argument("--no-kernels", action="store_true", help="skip the per-projection kernel times")
    parser.add_argument(
        "--candidates", type=int, default=4, help="configs timed per projection at M 32..512 (pick+next)"
    )
    parser.add_argument("--kernel-budget-s", type=float, default=120.0, help="stop timing candidates after this")
    parser.add_argument("--trace", help="write chrome traces of one eager pass at --host-m (PATH-torch/-theodolite)")
    parser.add_argument("--hidden", type=int, default=4096, help=argparse.SUPPRESS)  # the CPU smoke test's small
    parser.add_argument("--ffn", type=int, default=14336, help=argparse.SUPPRESS)  # decoder; the GPU run keeps
    parser.add_argument("--kv", type=int, default=1024, help=argparse.SUPPRESS)  # Llama-3-8B's sizes


def run(args: argparse.Namespace) -> int:
    from theodolite import bench_linear

    if args.layers < 1 or args.repeats < 1 or args.compile_layers < 1 or args.candidates < 1:
        raise TheodoliteError("--layers, --repeats, --compile-layers and --candidates must be positive")
    settings = bench_linear.Settings(
        layers=args.layers,
        ms=args.ms or bench_linear.MS,
        repeats=args.repeats,
        compile_layers=min(args.compile_layers, args.layers),
        compile=not args.no_compile,
        host_m=args.host_m,
        trace=args.trace,
        hidden=args.hidden,
        ffn=args.ffn,
        kv=args.kv,
        kernels=not args.no_kernels,
        candidate_top=args.candidates,
        kernel_budget_s=args.kernel_budget_s,
    )
    result = bench_linear.run(settings)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1, default=str) + "\n")
    print(bench_linear.table(result))
    return 0
