"""Refit the model's named parameters for issue 6's bars per suite, with some configs left out (offline, no GPU).

``python -m theodolite.model.evaluate --bars HINGE`` fits for the bars per suite; this adds ``--without``: configs
taken out of the space and out of the measured sets (sweep and final round) for this process, so a subset of the
deep-pipeline configs is scored against its own oracle.

    # from the repository root, the config space and profile under test in the work tree:
    python experiments/queue_fit.py RESULTS... --profile P [--without KEY...] \
        [--fit PARAM... --bars 20] [--set PARAM=VALUE...] [--write-profile P]

Every other argument is ``evaluate``'s.  Used on 2026-11-26 (CHANGELOG.md, "The loaded-latency K-step with six
deep configs").
"""

from __future__ import annotations

import sys
from collections.abc import Sequence


def leave_out(keys: set[str]) -> None:
    """Take ``keys`` out of the kernels' config space (this process, before any table is built) and out of every
    results file ``evaluate`` loads from now on."""
    if not keys:
        return
    import theodolite.model.evaluate as ev
    from theodolite.kernels import config as kernel_config

    space = kernel_config._space
    kernel_config._space = lambda dtype, variant: tuple(  # type: ignore[assignment]
        c for c in space(dtype, variant) if c.key not in keys
    )
    load = ev.load_results

    def load_without(path: str):  # type: ignore[no-untyped-def]
        results = load(path)
        for shape in results.shapes:
            for key in keys:
                shape.configs.pop(key, None)
                shape.final_ms.pop(key, None)
        return results

    ev.load_results = load_without  # type: ignore[assignment]


def main(argv: Sequence[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--without", nargs="*", default=[], metavar="KEY")
    args, rest = parser.parse_known_args(argv)
    leave_out(set(args.without))
    from theodolite.model.evaluate import main as evaluate

    return evaluate(rest)

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
