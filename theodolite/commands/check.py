"""``theodolite check NEW.h5 [MORE.h5 ...] --against REF.h5 [--tolerance FILE] [--html PATH]``: bring-up pass/fail.

One profile: per metric against the reference, as always.  Several (``check node/*.h5 --against REF``): the
node or fleet verdict (reports/fleet_check.py): each card against the reference and against the median of
its same-device peers, a summary table, and with ``--html`` one page of cards x metrics.  With several
profiles ``--against`` may be left out (peers only).

Exit status 0 when every card passes, 1 when any metric fails against the reference (or the reference
has a metric a card lacks) or a card is an outlier among three or more peers, 2 on a usage error
(unreadable profile or tolerance file).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from theodolite.errors import TheodoliteError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("new", type=Path, nargs="+", help="profile(s) of the card(s) under test")
    parser.add_argument("--against", type=Path, default=None, metavar="REF.h5", help="reference profile (same SKU)")
    parser.add_argument("--tolerance", type=Path, default=None, help="TOML or JSON tolerance overrides")
    parser.add_argument("--html", type=Path, default=None, help="also write a self-contained HTML page here")
    parser.add_argument(
        "--peer-tolerance",
        type=float,
        default=None,
        metavar="REL",
        help="with several profiles: deviation from the peers' median that makes an outlier, for every "
        "non-count metric (default: half the metric's reference tolerance, at least 3%%)",
    )


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    console = Console(width=None if sys.stdout.isatty() else 160)
    if len(args.new) > 1:
        return _fleet(args, console)
    if args.against is None:
        raise TheodoliteError("check of one profile needs --against REF.h5 (peers only needs two or more profiles)")
    if args.peer_tolerance is not None:
        raise TheodoliteError("--peer-tolerance needs two or more profiles to compare")
    from theodolite.profile import load_profile
    from theodolite.reports.check import check_profiles, load_tolerances, same_sku, terminal_table, verdict

    tolerances = load_tolerances(args.tolerance)
    new, ref = load_profile(args.new[0]), load_profile(args.against)
    rows = check_profiles(new, ref, tolerances)
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


def _fleet(args: argparse.Namespace, console: Any) -> int:
    from theodolite.profile import load_profile
    from theodolite.reports.check import load_tolerances
    from theodolite.reports.fleet_check import findings_table, fleet_check, summary_table

    if args.peer_tolerance is not None and not 0 <= args.peer_tolerance < 1:
        raise TheodoliteError(f"--peer-tolerance is a fraction in [0, 1), got {args.peer_tolerance}")
    paths = list(dict.fromkeys(args.new))
    if len(paths) < len(args.new):
        console.print(f"[yellow]note: {len(args.new) - len(paths)} profile(s) named twice, checked once[/yellow]")
    tolerances = load_tolerances(args.tolerance)
    reference = load_profile(args.against) if args.against is not None else None
    profiles = [load_profile(path) for path in paths]
    result = fleet_check(profiles, reference, tolerances, peer_tolerance=args.peer_tolerance)
    console.print(summary_table(result))
    findings = findings_table(result)
    if findings is not None:
        console.print(findings)
    if args.html is not None:
        from theodolite.reports.fleet_check import render_fleet_html
        from theodolite.reports.html import write_page

        page = write_page(render_fleet_html(result, str(args.tolerance) if args.tolerance else None), args.html)
        console.print(f"wrote {page}")
    failing = [card.label for card in result.cards if not card.passed]
    console.print("[green]PASS[/green]" if result.passed else f"[red]FAIL[/red]: {', '.join(failing)}")
    return 0 if result.passed else 1
