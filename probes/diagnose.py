"""Bring-up diagnostics: run the probes once, print every value, setting, reference and diagnostic.

``python -m theodolite.probes.diagnose [--quick] [--only matrix,l2] [-o DIR]``.  Unlike calibrate it
prints the raw results even when the profile would not validate, so a new GPU can be debugged.
"""

from __future__ import annotations

import argparse
import json
import os
import time


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="theodolite.probes.diagnose")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", default=None, help="comma-separated probe names")
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("-o", "--output", default=None, help="folder for diag.h5 and diag.json")
    args = parser.parse_args(argv)
    os.environ.setdefault("THEODOLITE_PROBE_DEBUG", "1")
    from theodolite.probes.runner import collect

    only = tuple(args.only.split(",")) if args.only else None
    begin = time.perf_counter()
    total, seconds = collect(
        args.device, quick=args.quick, only=only, on_probe=lambda n, i, t: print(f"== {n}", flush=True)
    )
    wall = time.perf_counter() - begin
    for name, m in sorted(total.metrics.items()):
        print(
            f"{name:28s} {m.value:14.6g} {m.unit:8s} cv={m.cv:.4f} flag={m.flagged} n={m.samples.size} "
            f"| {dict(m.settings)} | {m.note}"
        )
    for name, reason in total.unsupported.items():
        print(f"UNSUPPORTED {name}: {reason}")
    print("references", json.dumps(total.references, default=str))
    for key, value in total.diagnostics.items():
        print("diag", key, json.dumps(value, default=str)[:2000])
    for name, curve in total.curves.items():
        print("curve", name, [f"{x:.4g}:{y:.4g}" for x, y in zip(curve.x[:60], curve.y[:60], strict=False)])
    print("seconds", json.dumps(seconds), f"wall {wall:.1f}")
    if args.output:
        with open(os.path.join(args.output, "diag.json"), "w") as stream:
            json.dump(
                {
                    "metrics": {
                        k: {"value": m.value, "cv": m.cv, "settings": dict(m.settings), "note": m.note}
                        for k, m in total.metrics.items()
                    },
                    "references": total.references,
                    "diagnostics": total.diagnostics,
                    "seconds": seconds,
                    "unsupported": dict(total.unsupported),
                },
                stream,
                default=str,
                indent=1,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
