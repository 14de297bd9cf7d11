"""``theodolite compare NEW.h5 REF.h5 [--html PATH]``: two profiles side by side with ratios."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("new", type=Path, help="profile to compare (e.g. the H200's)")
    parser.add_argument("reference", type=Path, help="profile to compare against (e.g. the H100's)")
    parser.add_argument("--html", type=Path, default=None, help="also write a self-contained HTML page here")


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from theodolite.profile import load_profile
    from theodolite.reports.compare import render_compare_html, terminal_table

    new, ref = load_profile(args.new), load_profile(args.reference)
    console = Console(width=None if sys.stdout.isatty() else 160)
    console.print(terminal_table(new, ref))
    if args.html is not None:
        from theodolite.reports.html import write_page

        console.print(f"wrote {write_page(render_compare_html(new, ref), args.html)}")
    return 0
