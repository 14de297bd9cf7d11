"""The command line: ``python -m theodolite <command> ...``.

Errors that theodolite raises on purpose print as one line on stderr with a
non-zero exit; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from theodolite import __version__
from theodolite.commands import COMMANDS
from theodolite.errors import TheodoliteError


def _add_arguments_lazily(subparsers: argparse._SubParsersAction, argv: Sequence[str]) -> None:
    chosen = next((arg for arg in argv if not arg.startswith("-")), None)
    for name, module_name, help_text in COMMANDS:
        parser = subparsers.add_parser(name, help=help_text, description=help_text)
        # Only the chosen command's module is imported (its arguments are needed to parse).
        if name == chosen:
            module = importlib.import_module(module_name)
            module.add_arguments(parser)
            parser.set_defaults(_module=module)


def build_parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="theodolite",
        description="Measure a GPU once into a profile; pick and run fast GEMM configs from it.",
    )
    parser.add_argument("--version", action="version", version=f"theodolite {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_arguments_lazily(subparsers, argv)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(arguments)
    args = parser.parse_args(arguments)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return int(args._module.run(args) or 0)
    except TheodoliteError as error:
        print(f"theodolite {args.command}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"theodolite {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
