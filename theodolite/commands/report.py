"""``theodolite report [PROFILE.h5 ...] [--results FILE.json ...] [-o DIR]``: self-contained HTML pages.

With no argument every bundled profile gets a page; ``--results`` renders the model-validation page
of a ``validate`` (or ``bench``) results file instead.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from theodolite.errors import TheodoliteError

DEFAULT_DIR = Path("reports/html")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("profiles", nargs="*", type=Path, help="profile files (default: every bundled profile)")
    parser.add_argument("--results", nargs="+", type=Path, default=[], help="results JSON file(s) of validate/bench")
    parser.add_argument("-o", "--output", type=Path, default=DEFAULT_DIR, help=f"folder for the pages ({DEFAULT_DIR})")
    parser.add_argument(
        "--profile", default=None, help="profile (or datasheet:NAME) that explains picks on the validation page"
    )


def run(args: argparse.Namespace) -> int:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise TheodoliteError("report needs matplotlib: pip install 'theodolite[report]'") from None
    from theodolite.profile import load_profile
    from theodolite.profile.resolve import bundled_profiles
    from theodolite.reports.profile_page import write_profile_page

    written: list[Path] = []
    if args.results:
        from theodolite.reports.validation_page import write_validation_page

        for path in args.results:
            written.append(write_validation_page(path, args.output, profile_path=args.profile))
    profiles = list(args.profiles) or ([] if args.results else bundled_profiles())
    if not profiles and not args.results:
        raise TheodoliteError("no profile to report: none given and none bundled")
    for path in profiles:
        profile = load_profile(path)
        written.append(write_profile_page(profile, args.output, Path(path).stem))
    from theodolite.reports.html import write_index

    for page in written:
        print(f"wrote {page}")
    print(f"wrote {write_index(args.output)}")
    return 0
