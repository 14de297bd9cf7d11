"""``theodolite profile show|diff|datasheet``: read profiles as tables, compare two, write datasheet ones."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from rich.console import Console
from rich.table import Table

from theodolite.errors import ProfileError
from theodolite.profile import METRICS, Profile, load_profile, save_profile
from theodolite.profile.datasheet import BUNDLED_DATASHEETS, DATASHEETS
from theodolite.profile.resolve import bundled_dir
from theodolite.units import format_quantity


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    show = actions.add_parser("show", help="print a profile as a table")
    show.add_argument("path", type=Path)
    diff = actions.add_parser("diff", help="value ratios of profile A over profile B")
    diff.add_argument("a", type=Path)
    diff.add_argument("b", type=Path)
    sheet = actions.add_parser("datasheet", help="write a datasheet profile (a GPU we cannot measure)")
    sheet.add_argument("name", choices=sorted(DATASHEETS))
    sheet.add_argument("-o", "--output", type=Path, help="default: the bundled profiles folder")
    sheet.add_argument("--force", action="store_true", help="replace an existing file")


def _spread(profile: Profile, name: str) -> str:
    measurement = profile.metrics[name]
    if math.isnan(measurement.p10):
        return ""
    low = format_quantity(measurement.p10, measurement.unit, 3)
    high = format_quantity(measurement.p90, measurement.unit, 3)
    return f"{low} .. {high}"


def show_table(profile: Profile) -> Table:
    p = profile.provenance
    title = f"{p.device_name} ({p.architecture}, {p.source}) fingerprint {profile.fingerprint}"
    table = Table(title=title, caption=f"{profile.origin} | made {p.created_utc} | {p.runtime} {p.driver}".strip())
    for column in ("metric", "value", "p10 .. p90", "CV", "method", "flag"):
        table.add_column(column, overflow="fold")
    for name in METRICS:  # schema order groups the metrics by subsystem
        if name not in profile.metrics:
            continue
        measurement = profile.metrics[name]
        cv = "" if math.isnan(measurement.cv) else f"{measurement.cv:.1%}"
        flag = "[red]noisy[/red]" if measurement.flagged else ""
        table.add_row(
            name,
            format_quantity(measurement.value, measurement.unit),
            _spread(profile, name),
            cv,
            measurement.method,
            flag,
        )
    for name, reason in sorted(profile.unsupported.items()):
        table.add_row(name, "unsupported", "", "", reason, "")
    return table


def diff_table(a: Profile, b: Profile) -> Table:
    table = Table(title=f"{a.device_name} ({a.provenance.source}) / {b.device_name} ({b.provenance.source})")
    for column in ("metric", "A", "B", "A/B"):
        table.add_column(column)
    for name in METRICS:
        if name not in a.metrics and name not in b.metrics:
            continue
        value_a, value_b = a.get(name), b.get(name)
        unit = METRICS[name].unit
        ratio = f"{value_a / value_b:.3f}" if value_a is not None and value_b else "-"
        table.add_row(
            name,
            "-" if value_a is None else format_quantity(value_a, unit),
            "-" if value_b is None else format_quantity(value_b, unit),
            ratio,
        )
    return table


def run(args: argparse.Namespace) -> int:
    console = Console()
    if args.action == "show":
        console.print(show_table(load_profile(args.path)))
    elif args.action == "diff":
        console.print(diff_table(load_profile(args.a), load_profile(args.b)))
    else:
        default_name = BUNDLED_DATASHEETS.get(args.name, f"{args.name}-datasheet.h5")
        output = args.output or bundled_dir() / default_name
        if output.exists() and not args.force:
            raise ProfileError(f"{output}: file exists (use --force to replace it)")
        save_profile(DATASHEETS[args.name](), output, overwrite=args.force)
        console.print(f"wrote {output}")
    return 0
