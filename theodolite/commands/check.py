"""``theodolite check NEW.h5 --against REF.h5 [--tolerance FILE] [--html PATH]``: bring-up pass/fail per metric.

Exit status 0 when every metric is within tolerance, 1 when any fails (or the reference has a metric
the new profile lacks), 2 on a usage error (unreadable profile or tolerance file).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("new", type=Path, help="profile of the card under test")
    parser.add_argument("--against", type=Path, required=True, metavar="REF.h5", help="reference profile (same SKU)")
    parser.add_argument("--tolerance", type=Path, default=None, help="TOML or JSON tolerance overrides")
    parser.add_argument("--html", type=Path, default=None, help="also write a self-contained HTML page here")


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from theodolite.profile import load_profile
    from theodolite.reports.check import check_profiles, load_tolerances, same_sku, terminal_table, verdict

    tolerances = load_tolerances(args.tolerance)
    new, ref = load_profile(args.new), load_profile(args.against)
    rows = check_profiles(new, ref, tolerances)
    console = Console(width=None if sys.stdout.isatty() else 160)
    console.print(terminal_table(rows, new, ref))
    if not same_sku(new, ref):
        console.print(
            f"[yellow]note: {new.device_name!r} and {ref.device_name!r} are different devices; SKU-defining "
            "metrics (memory capacity and bandwidth, ...) are expected to differ[/yellow]"
        )
    if args.html is not None:
        from theodolite.reports.check import render_check_html
        from theodolite.reports.html import write_page

        page = write_page(render_check_html(rows, new, ref, str(args.tolerance) if args.tolerance else None), args.html)
        console.print(f"wrote {page}")
    passed = verdict(rows)
    failed = [row.metric for row in rows if row.failed]
    console.print("[green]PASS[/green]" if passed else f"[red]FAIL[/red]: {', '.join(failed)}")
    return 0 if passed else 1
