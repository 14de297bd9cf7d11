"""``theodolite validate``: the model's picks against the exhaustive oracle, torch.matmul and peers (GPU).

Writes a ``theodolite.results`` JSON after every shape; ``--resume`` continues it, ``--shard i/n``
(zero-based) takes every n-th shape from i, ``--merge`` joins shard files, ``--all-devices`` runs a shard per
visible GPU side by side and merges them (``theodolite.validation.devices``), ``--budget-s`` stops
before a shape that would overrun the time budget.  After each shape's sweep a final round times
torch.matmul, the sweep's fastest few and the picks again side by side (``--no-final`` skips it;
``--final FILE`` adds it to a results file measured without one).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from theodolite.errors import TheodoliteError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--shapes",
        default="llm",
        help="llm, random-dev, square, random:N:seed, decode, wide:N:seed, or a CSV (name,M,N,K[,dtype][,layout])",
    )
    parser.add_argument(
        "--dtype",
        default="bf16",
        choices=("fp16", "bf16", "tf32", "fp32", "fp8e4m3", "fp8e5m2"),
        help="input dtype where the CSV has no dtype column (bf16); fp8's baseline is torch._scaled_mm (scales 1, "
        "bf16 output, B K-major; for e5m2, which it refuses for both inputs, e5m2 x e4m3), tf32's torch.matmul "
        "with allow_tf32",
    )
    parser.add_argument(
        "--layout", default="nn", choices=("nn", "nt", "tn", "tt"), help="layout where the suite has no layout column"
    )
    parser.add_argument("--profile", default=None, help="profile file or datasheet:NAME (default: this device's)")
    parser.add_argument(
        "--peers",
        default=None,
        help="comma list of fixed, nvmmh, autotune ('' for none; default: fixed, and nvmmh where it is installed)",
    )
    parser.add_argument("--variants", default=None, help="comma list of kernel variants (default: all)")
    parser.add_argument(
        "--shard", default=None, metavar="i/n", help="shard i of n (zero-based, interleaved); also with --final"
    )
    parser.add_argument(
        "--all-devices",
        action="store_true",
        help="one process per visible GPU (one model), each a shard i/n of the sweep or of --final's round, merged",
    )
    parser.add_argument("--resume", action="store_true", help="skip shapes already in the output file")
    parser.add_argument("--budget-s", type=float, default=None, help="stop before a shape that would overrun this")
    parser.add_argument("--rep-ms", type=float, default=8.0, help="timing budget per config (ms of runs)")
    parser.add_argument("--max-reps", type=int, default=50, help="most timed runs per config")
    parser.add_argument("--no-precompile", action="store_true", help="compile on first use instead of in parallel")
    parser.add_argument("--workers", type=int, default=0, help="precompile processes (default: CPUs - 1, at most 16)")
    parser.add_argument(
        "--merge",
        nargs="+",
        type=Path,
        default=None,
        metavar="FILE",
        help="join shard result files into -o instead of measuring",
    )
    parser.add_argument(
        "--add-peers", type=Path, default=None, metavar="FILE", help="add fixed/nvmmh picks to a results file (CPU)"
    )
    parser.add_argument(
        "--from-results",
        type=Path,
        default=None,
        metavar="FILE",
        help="score the model (and fixed/nvmmh) on a bench results file that timed every legal config (CPU)",
    )
    parser.add_argument(
        "--final",
        type=Path,
        default=None,
        metavar="FILE",
        help="time the side-by-side final round (torch, the sweep's best few, the picks) for a results file (GPU)",
    )
    parser.add_argument("--no-final", action="store_true", help="sweep without the final round")
    parser.add_argument("--dry-run", action="store_true", help="no GPU: list picks and config counts, estimate time")
    parser.add_argument(
        "--summary", type=Path, default=None, metavar="FILE", help="print the summary of a results file"
    )
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        default=None,
        help="results JSON (default reports/results/validate-SUITE-DTYPE[-shardIofN].json)",
    )


def _default_output(args: argparse.Namespace, shard: tuple[int, int]) -> Path:
    suite = Path(args.shapes).stem if args.shapes.endswith(".csv") else args.shapes.replace(":", "-")
    tail = f"-shard{shard[0]}of{shard[1]}" if shard[1] > 1 else ""
    return Path("reports/results") / f"validate-{suite}-{args.dtype}{tail}.json"


def run(args: argparse.Namespace) -> int:
    from theodolite.validation import ValidateSettings, merge_files, parse_shard, print_summary, validate

    if args.summary is not None:
        from theodolite.results import load_results

        print_summary(load_results(args.summary))
        return 0
    if args.peers is None:
        args.peers = default_peers()
    if args.from_results is not None:
        from theodolite.results import load_results, save_results
        from theodolite.validation import add_model_picks, add_peer_picks, load_validation_profile

        if args.output is None:
            raise TheodoliteError("--from-results needs -o/--output for the scored file")
        results = load_results(args.from_results)
        profile = load_validation_profile(args.profile)
        picked = add_model_picks(results, profile)
        wanted = tuple(p.strip() for p in args.peers.split(",") if p.strip() in ("fixed", "nvmmh"))
        try:
            add_peer_picks(results, wanted)
        except TheodoliteError as error:
            print(f"warning: peers skipped: {error}", file=sys.stderr)
        results.command = f"{results.command} | theodolite validate --from-results {args.from_results}"
        results.settings["source_results"] = str(args.from_results)
        save_results(results, args.output)
        print(f"scored {picked} model picks on {args.from_results} with {profile.origin}; wrote {args.output}")
        print_summary(results)
        return 0
    if args.add_peers is not None:
        from theodolite.results import load_results, save_results
        from theodolite.validation import add_peer_picks

        results = load_results(args.add_peers)
        wanted = tuple(p.strip() for p in args.peers.split(",") if p.strip() in ("fixed", "nvmmh"))
        added = add_peer_picks(results, wanted)
        save_results(results, args.add_peers)
        print(f"added {added} peer picks to {args.add_peers}")
        print_summary(results)
        return 0
    if args.merge:
        if args.output is None:
            raise TheodoliteError("--merge needs -o/--output for the merged file")
        merged = merge_files(args.merge, args.output)
        print(f"merged {len(args.merge)} files ({len(merged.shapes)} shapes) into {args.output}")
        print_summary(merged)
        return 0
    if args.budget_s is not None and args.budget_s <= 0:
        raise TheodoliteError("--budget-s must be positive")
    if args.all_devices:
        return _all_devices(args)
    shard = parse_shard(args.shard)
    peers = tuple(p.strip() for p in args.peers.split(",") if p.strip())
    variants = tuple(v.strip() for v in args.variants.split(",")) if args.variants else None
    settings = ValidateSettings(
        suite=args.shapes,
        dtype=args.dtype,
        layout=args.layout,
        peers=peers,
        shard=shard,
        resume=args.resume,
        budget_s=args.budget_s,
        variants=variants,
        rep_ms=args.rep_ms,
        max_reps=args.max_reps,
        precompile=not args.no_precompile,
        workers=args.workers,
        final=not args.no_final,
    )
    if args.dry_run:
        return _dry_run(args, settings)
    command = "theodolite validate " + " ".join(sys.argv[2:] if len(sys.argv) > 2 else [])
    if args.final is not None:
        from theodolite.validation import final_on_file

        if args.output is None:
            raise TheodoliteError("--final needs -o/--output for the file with the final round")
        results = final_on_file(args.final, args.output, settings, command=command)
        print(f"final round of {args.final} written to {args.output}")
        print_summary(results)
        return 0
    output = args.output or _default_output(args, shard)
    results = validate(args.shapes, settings, output, args.profile, command=command)
    print(
        f"wrote {output} ({len(results.shapes)} shapes{', incomplete' if results.settings.get('incomplete') else ''})"
    )
    print_summary(results)
    return 0


def _child_command(args: argparse.Namespace, index: int, count: int, output: Path, workers: int) -> list[str]:
    """The validate command line of shard ``index`` of ``count``: this one's options, its shard, its own file (a
    sweep's shard always resumes its file, which ``seed_shards`` prepared; a final round's only with --resume)."""
    command = [sys.executable, "-m", "theodolite", "validate", "--rep-ms", str(args.rep_ms)]
    command += ["--max-reps", str(args.max_reps), "--workers", str(workers), "--shard", f"{index}/{count}"]
    command += ["-o", str(output)]
    if args.final is not None:
        command += ["--final", str(args.final)] + ["--resume"] * args.resume
        return command + ["--no-precompile"] * args.no_precompile
    command += ["--shapes", args.shapes, "--dtype", args.dtype, "--layout", args.layout, "--peers", args.peers]
    command += ["--resume"]
    for flag, value in (("--profile", args.profile), ("--variants", args.variants), ("--budget-s", args.budget_s)):
        if value is not None:
            command += [flag, str(value)]
    return command + ["--no-precompile"] * args.no_precompile + ["--no-final"] * args.no_final


def default_peers() -> str:
    """``--peers`` left out: the fixed-config peer, and nvMatmulHeuristics where its package is installed (asked for
    by name, a missing package is an error; left to the default, a note)."""
    import importlib.util

    if importlib.util.find_spec("nvMatmulHeuristics") is not None:
        return "fixed,nvmmh"
    print("note: peer nvmmh left out (no nvMatmulHeuristics package); --peers fixed,nvmmh asks for it", file=sys.stderr)
    return "fixed"


def _all_devices(args: argparse.Namespace) -> int:
    """One shard per visible GPU, run side by side, then merged into the output (``theodolite.validation.devices``)."""
    import os

    from theodolite.commands.calibrate import devices
    from theodolite.validation import devices as shards
    from theodolite.validation import load_shapes, print_summary

    if args.shard is not None or args.dry_run:
        raise TheodoliteError("--all-devices takes the shards itself: drop --shard and --dry-run")
    if args.final is not None and args.output is None:
        raise TheodoliteError("--final needs -o/--output for the file with the final round")
    names = [name for name, _ in devices()]
    shards.check_one_model(names)
    count = len(names)
    output = args.output or _default_output(args, (0, 1))
    output.parent.mkdir(parents=True, exist_ok=True)
    if args.final is not None:  # each shard takes its shapes from the file itself (and resumes its own file)
        paths = shards.shard_paths(output, count)
        if not args.resume:
            shards.remove_stale(paths)
    else:
        paths = shards.seed_shards(output, load_shapes(args.shapes, args.dtype, args.layout), count, args.resume)
    workers = args.workers or max(1, min(16, ((os.cpu_count() or 2) - 1) // count))
    commands = [_child_command(args, i, count, path, workers) for i, path in enumerate(paths)]
    what = f"the final round of {args.final}" if args.final is not None else args.shapes
    print(f"validate on {count} x {names[0]}: {what}, {workers} compile workers each")
    codes = shards.run_shards(commands, paths)
    failed = [i for i, code in enumerate(codes) if code != 0]
    for index in failed:
        print(f"shard {index}/{count} failed (exit {codes[index]}): {shards.log_tail(paths[index])}", file=sys.stderr)
    merged = shards.merge_shards(paths, output, remove=not failed)
    note = f"; shards {failed} failed (their logs kept)" if failed else ""
    print(f"merged {len(merged.shapes)} shapes into {output}{note}")
    print_summary(merged)
    return max(codes, default=0)


def _dry_run(args: argparse.Namespace, settings: object) -> int:
    from rich.console import Console
    from rich.table import Table

    from theodolite.validation import NvmmhPeer, dry_run, load_shapes, load_validation_profile

    profile = load_validation_profile(args.profile)
    shapes = load_shapes(args.shapes, args.dtype, args.layout)
    nvmmh = NvmmhPeer(profile.device_name) if "nvmmh" in settings.peers else None  # type: ignore[attr-defined]
    rows = dry_run(shapes, settings, profile, nvmmh)  # type: ignore[arg-type]
    table = Table(title=f"dry run: {args.shapes} on the profile of {profile.device_name} ({profile.origin})")
    for column in ("shape", "MxNxK", "legal", "picks", "est. s"):
        table.add_column(column)
    for row in rows:
        shape = row["shape"]
        picks = "; ".join(f"{who} {key}" for who, key in row["picks"].items())
        table.add_row(
            shape.name, f"{shape.m}x{shape.n}x{shape.k}", str(row["legal"]), picks, f"{row['estimate_s']:.1f}"
        )
    console = Console(width=None if sys.stdout.isatty() else 200)
    console.print(table)
    total = sum(row["estimate_s"] for row in rows)
    configs = sum(row["legal"] for row in rows)
    console.print(
        f"{len(rows)} shapes, {configs} config timings; rough timing cost {total:.0f}s "
        f"(+ precompile, ~1-3 min); per shape {total / max(1, len(rows)):.1f}s"
    )
    return 0
