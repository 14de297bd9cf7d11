"""Replace one kernel variant's measurements in a validate results file by those of a re-sweep of that variant.

For a kernel change that touches one variant only: ``theodolite validate --variants V`` times V's configs (and
torch.matmul) again, and this writes FULL with V's configs, errors and relative errors taken from that re-sweep,
everything else kept, and V's stale entries dropped from the final round (re-run it with ``validate --final``:
the final round times the candidates side by side again).  Shapes match by (name, M, N, K, dtype, layout, batch).

    python experiments/overlay_variant.py FULL.json RESWEEP.json streamk -o OUT.json
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile


def _key(shape: dict) -> tuple:
    return (shape["name"], shape["M"], shape["N"], shape["K"], shape["dtype"], shape["layout"], shape["batch"])


def overlay(full: dict, resweep: dict, variant: str, note: str) -> dict:
    fresh = {_key(s): s for s in resweep["shapes"]}
    prefix = variant + "/"
    missing = 0
    for shape in full["shapes"]:
        new = fresh.get(_key(shape))
        for field in ("configs", "errors", "max_rel_error", "final_ms"):
            values = shape.get(field) or {}
            kept = {k: v for k, v in values.items() if not k.startswith(prefix)}
            if new is not None and field != "final_ms":
                kept.update({k: v for k, v in (new.get(field) or {}).items() if k.startswith(prefix)})
            if field in shape and shape[field] is not None:
                shape[field] = kept
        missing += new is None
    if missing:
        raise SystemExit(f"{missing} shapes of the full file are not in the re-sweep")
    full["settings"] = {**full["settings"], f"{variant}_remeasured": note}
    return full


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("full")
    parser.add_argument("resweep")
    parser.add_argument("variant")
    parser.add_argument("-o", "--output", required=True)
    args = parser.parse_args()
    with open(args.full) as stream:
        full = json.load(stream)
    with open(args.resweep) as stream:
        resweep = json.load(stream)
    note = f"{args.variant} configs from {os.path.basename(args.resweep)} ({resweep.get('created_utc', '?')})"
    merged = overlay(full, resweep, args.variant, note)
    folder = os.path.dirname(os.path.abspath(args.output))
    handle, temporary = tempfile.mkstemp(dir=folder, suffix=".json")
    with os.fdopen(handle, "w") as stream:
        json.dump(merged, stream, indent=1)
    os.replace(temporary, args.output)
    os.chmod(args.output, 0o644)


if __name__ == "__main__":
    main()
