"""Is the TMA kernels' extra cost per launch, as the `tma-launch` probe reads it from one-tile GEMMs?

``model_tma_launch_extra`` (0.43 us on the H200) is solved so that one-tile GEMMs through TMA configs take their
measured time; where a pointer-based pick has a TMA twin (same tile, vector loads), that extra decides between them.
This times twins side by side (``python -m theodolite bench --config``, bf16 nn) on one tile, one and two full waves
of tiles (132 SMs) at one and eight K-steps, and many waves, and sets the measured TMA-minus-pointer difference against
the model's without the extra: the extra a twin pair asks for.

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/tma_twins.py        # GPU: $OUT/tma-twins.json
    PYTHONPATH=$PWD python3 experiments/tma_twins.py --summary experiments/tma-twins-h200.json PROFILE   # no GPU

H200 (``tma-twins-h200.json``, bundled profile): the pairs ask -0.8 to +1.4 us (median +0.10): one tile at one
K-step 0.10-0.18 for 64x128 and 128x128 (-0.2 for 128x256), at eight K-steps none (the TMA twin 0.2-0.8 us faster
than the model's difference), one and two full waves at one K-step 0.1-0.6, many waves 0.4-1.4.  No launch cost
describes them: the difference moves with the K-steps and the waves, so a probe of twins over a wave would not settle
the value; kept as a known defect (docs/model.md).
"""

from __future__ import annotations

import json
import os
import statistics
import sys

SHAPES = [
    ("one64", 64, 128, 64), ("one128", 128, 128, 64), ("one64k", 64, 128, 512), ("one128k", 128, 128, 512),
    ("wave1", 768, 1408, 64), ("wave2", 1536, 1408, 64), ("wave1k", 768, 1408, 512), ("wave2k", 1536, 1408, 512),
    ("many", 3072, 2816, 64),
]  # fmt: skip
PAIRS = [
    ("tma/64x128x64/g8/w4/s4/k1", "persistent/64x128x64/g8/w4/s4/k1"),
    ("tma/128x128x64/g8/w8/s4/k1", "persistent/128x128x64/g8/w8/s4/k1"),
    ("tma/128x256x64/g8/w8/s4/k1", "persistent/128x256x64/g8/w8/s4/k1"),
]


def run(out: str) -> None:
    from harness import bench_configs

    keys = [key for pair in PAIRS for key in pair]
    bench_configs(SHAPES, keys, os.path.join(out, "tma-twins.json"), "bf16", "nn")


def summary(path: str, profile_path: str) -> None:
    from theodolite.kernels.config import GemmConfig, Problem
    from theodolite.model.predict import ConfigTable, evaluate

    from theodolite.profile.hdf5 import load_profile

    profile = load_profile(profile_path)
    extra = float(profile.value("model_tma_launch_extra"))
    table = ConfigTable(profile, "bf16", extra=tuple(GemmConfig.from_key(k) for pair in PAIRS for k in pair))
    asked = []
    with open(path) as stream:
        shapes = json.load(stream)["shapes"]
    for s in shapes:
        predicted, _ = evaluate(table, Problem(s["M"], s["N"], s["K"], dtype="bf16", layout="nn"))
        cells = []
        for tma, pointer in PAIRS:
            measured = (s["configs"][tma] - s["configs"][pointer]) * 1e3
            model = (predicted[table.index[tma]] - predicted[table.index[pointer]] - extra) * 1e6
            asked.append(measured - model)
            cells.append(f"{tma.split('/')[1]} {measured:+.2f} / {model:+.2f}")
        print(f"{s['name']:8s} {s['M']}x{s['N']}x{s['K']}: TMA - pointer, measured / model without the extra (us): "
              + ", ".join(cells))  # fmt: skip
    print(f"extra asked: median {statistics.median(asked):+.2f} us, {min(asked):+.2f} .. {max(asked):+.2f} "
          f"(the profile's {extra * 1e6:.2f})")  # fmt: skip


if __name__ == "__main__":
    if sys.argv[1:2] == ["--summary"]:
        summary(sys.argv[2], sys.argv[3])
    else:
        run(os.environ.get("OUT", "."))
