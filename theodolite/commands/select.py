"""``theodolite select [M N K]``: the model's config pick, predicted TFLOP/s and bottleneck.

With no shape it shows a few LLM layer shapes; on a GPU it also runs the picks and prints the
measured TFLOP/s beside torch.matmul.  ``--benchmark`` times the selection itself.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from theodolite.errors import TheodoliteError

# Used when the kernels' shape suites are not installed: (name, M, N, K).
BUILTIN_SHAPES: tuple[tuple[str, int, int, int], ...] = (
    ("llama3-8b.qkv decode", 16, 6144, 4096),
    ("llama3-8b.qkv prefill", 4096, 6144, 4096),
    ("llama3-8b.o", 4096, 4096, 4096),
    ("llama3-8b.up", 4096, 28672, 4096),
    ("llama3-8b.down", 4096, 4096, 14336),
    ("llama3-70b.down decode", 64, 8192, 28672),
    ("square 8192", 8192, 8192, 8192),
)
DEFAULT_SUITE_ROWS = 10


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("shape", nargs="*", type=int, metavar="M N K", help="problem size (omit for LLM shapes)")
    parser.add_argument("--dtype", default="bf16", help="input dtype (fp16, bf16, tf32, fp32, fp8e4m3, fp8e5m2)")
    parser.add_argument("--layout", default="nn", help="A then B: n = row-major, t = transposed (default nn)")
    parser.add_argument("--batch", type=int, default=1, help="batch count (default 1)")
    parser.add_argument("--profile", default=None, help="profile file (default: resolution order)")
    parser.add_argument("--explain", action="store_true", help="show the top candidates with their time breakdown")
    parser.add_argument("--suite", default=None, help="shape suite or CSV for the no-shape listing (default llm)")
    parser.add_argument("--no-run", action="store_true", help="do not run the picks even when a GPU is present")
    parser.add_argument("--benchmark", action="store_true", help="time the selection on this CPU (medians)")


def _shapes(suite: str | None) -> list[tuple[str, int, int, int]]:
    try:
        from theodolite.kernels.shapes import load_suite  # type: ignore[import-not-found]
    except ImportError:
        load_suite = None
    if load_suite is not None:
        try:
            rows = list(load_suite(suite or "llm"))
        except (TheodoliteError, OSError, ValueError):
            if suite:
                raise
            rows = []
        if rows:
            if suite:
                return [(str(r[0]), int(r[1]), int(r[2]), int(r[3])) for r in rows]
            return _spread([(str(r[0]), int(r[1]), int(r[2]), int(r[3])) for r in rows], DEFAULT_SUITE_ROWS)
    if suite and Path(suite).is_file():
        out = []
        for line in Path(suite).read_text().splitlines():
            parts = line.strip().split(",")
            if len(parts) >= 4 and not line.startswith("#") and parts[1].strip().isdigit():
                out.append((parts[0], int(parts[1]), int(parts[2]), int(parts[3])))
        return out
    return list(BUILTIN_SHAPES)


def _spread(rows: list[tuple[str, int, int, int]], count: int) -> list[tuple[str, int, int, int]]:
    """A few rows spread over the suite (it lists each layer at several token counts)."""
    if len(rows) <= count:
        return rows
    step = len(rows) / count
    return [rows[int(i * step)] for i in range(count)]


def _gpu() -> bool:
    try:
        import torch
    except ImportError:  # pragma: no cover
        return False
    return bool(torch.cuda.is_available())


def _measure(m: int, n: int, k: int, dtype: str, config: object, sms: int) -> tuple[float, float]:
    """Measured TFLOP/s of the pick and of torch.matmul (do_bench medians, random data)."""
    import torch
    import triton.testing

    from theodolite import kernels

    torch_dtype = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32, "tf32": torch.float32}[dtype]
    a = torch.randn(m, k, device="cuda", dtype=torch_dtype)
    b = torch.randn(k, n, device="cuda", dtype=torch_dtype)
    flops = 2.0 * m * n * k
    ms_pick = triton.testing.do_bench(lambda: kernels.gemm(a, b, config, num_sms=sms))
    ms_torch = triton.testing.do_bench(lambda: torch.matmul(a, b))
    return flops / (ms_pick * 1e-3) / 1e12, flops / (ms_torch * 1e-3) / 1e12


def _print_table(title: str, header: list[str], rows: list[list[str]]) -> None:
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:  # pragma: no cover - rich is a dependency
        print(title)
        print("  ".join(header))
        for row in rows:
            print("  ".join(row))
        return
    table = Table(title=title)
    for i, name in enumerate(header):
        table.add_column(name, justify="left" if i < 2 else "right", overflow="fold")
    for row in rows:
        table.add_row(*row)
    Console(width=200).print(table)


def run(args: argparse.Namespace) -> int:
    from theodolite.api import resolve, select

    if args.benchmark:
        from theodolite.model.speed import main as bench_main

        return bench_main(profile=args.profile)
    profile = resolve(args.profile)
    if args.shape:
        if len(args.shape) != 3:
            raise TheodoliteError(f"give M N K (three integers), got {len(args.shape)} numbers")
        m, n, k = args.shape
        selection = select(m, n, k, dtype=args.dtype, layout=args.layout, batch=args.batch, profile=profile)
        if args.explain:
            print(selection.explain())
        else:
            print(
                f"{m}x{n}x{k} {args.dtype} {args.layout}: {selection.config.key}  "
                f"predicted {selection.predicted_time_s * 1e6:.1f} us = {selection.predicted_tflops:.1f} TFLOP/s, "
                f"bound by {selection.bottleneck}  [{profile.device_name}, profile {selection.profile_fingerprint}]"
            )
        return 0
    shapes = _shapes(args.suite)
    on_gpu = _gpu() and not args.no_run
    header = ["shape", "pick", "M", "N", "K", "pred TFLOP/s", "bound"]
    if on_gpu:
        header += ["meas TFLOP/s", "torch TFLOP/s"]
    rows = []
    for name, m, n, k in shapes:
        selection = select(m, n, k, dtype=args.dtype, layout=args.layout, batch=args.batch, profile=profile)
        row = [name, selection.config.key, str(m), str(n), str(k), f"{selection.predicted_tflops:.1f}",
               selection.bottleneck]  # fmt: skip
        if on_gpu:
            measured, reference = _measure(m, n, k, args.dtype, selection.config, int(profile.value("sm_count")))
            row += [f"{measured:.1f}", f"{reference:.1f}"]
        rows.append(row)
    source = profile.provenance.source
    _print_table(f"model picks on {profile.device_name} ({source} profile {selection.profile_fingerprint})", header,
                 rows)  # fmt: skip
    return 0
