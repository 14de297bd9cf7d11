"""One full calibrate on this GPU (probes, kernel builds, model stage), its seconds per stage, then every model
parameter with its method, spread and the hold-out score, as JSON under $OUT and a table last.

    PYTHONPATH=$PWD python3 experiments/calibrate_model_stage.py [--quick]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path


def main() -> int:
    out = Path(os.environ.get("OUT", "."))
    quick = "--quick" in sys.argv[1:]
    name = "calibrated-quick.h5" if quick else "calibrated.h5"
    target = out / name
    command = [sys.executable, "-m", "theodolite", "calibrate", "-o", str(target), "--force"] + ["--quick"] * quick
    begin = time.perf_counter()
    code = subprocess.call(command)
    wall = time.perf_counter() - begin
    if code != 0:
        print(f"calibrate exited {code} after {wall:.0f} s")
        return code
    from theodolite.model.hardware import MODEL_PARAMETERS
    from theodolite.probes.model_stage import show

    from theodolite.profile import load_profile

    profile = load_profile(target)
    data = {
        "command": " ".join(command[1:]),
        "wall_s": wall,
        "device": profile.device_name,
        "parameters": {
            n: {"value": m.value, "method": m.method, "flagged": m.flagged, "settings": dict(m.settings)}
            for n, m in profile.metrics.items()
            if n in MODEL_PARAMETERS
        },
    }
    (out / f"{target.stem}.json").write_text(json.dumps(data, indent=1, default=str))
    print(f"calibrate wall {wall:.1f} s ({'quick' if quick else 'full'}) -> {target}")
    print(show(profile))
    return 0


if __name__ == "__main__":
    sys.exit(main())
