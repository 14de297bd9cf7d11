"""How does a work item's fixed cost grow with its tile?

Short-K GEMMs with large outputs are predicted too fast, more so for larger tiles (docs/model.md, known defects:
"Short K, fixed costs" and "HBM scale"): calibrate's flatten probe timed the plain ``persistent/128x128x64`` on
4096x4096x128 at 26.2 us against 13.3 predicted, while its 64x64x128 twin read 59.5 against 58.2 (H200).  This times,
side by side with torch.matmul as ``theodolite validate`` does (``kernels.benchmark.final_round``: L2-flushed runs
for shapes over half the L2, graph replays otherwise), configs of 64x64 to 128x256 tiles, pointer-based and TMA,
plain and flattened, on many-wave shapes of one or two K-steps, and prints each beside the model's time and the
per-item time it implies (the kernel's time over the work items each program runs).  Run on a GPU from the
repository root (writes ``$OUT/epilogue-tiles-<gpu>.json``)::

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/epilogue_tiles.py
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path

import torch
from theodolite.kernels.benchmark import BenchSettings, Timer, final_round, flushed_timing, timing_floors
from theodolite.kernels.build import precompile
from theodolite.kernels.config import GemmConfig, Problem
from theodolite.model.calibration_fit import Predictor, Timing

from theodolite.profile.hdf5 import load_profile

ROOT = Path(__file__).resolve().parents[1]
SHAPES = ((4096, 4096, 64), (4096, 4096, 128), (8192, 8192, 64), (2048, 2048, 64))
KEYS = (
    "persistent/64x64x64/g8/w4/s4/k1",
    "persistent/64x64x128/g8/w4/s4/k1", "persistent/64x64x128/g8/w4/s4/k1/f",
    "persistent/128x64x64/g8/w4/s4/k1", "persistent/128x64x64/g8/w4/s4/k1/f",
    "persistent/128x128x64/g8/w8/s3/k1", "persistent/128x128x64/g8/w8/s3/k1/f",
    "persistent/128x256x64/g8/w8/s3/k1", "persistent/128x256x64/g8/w8/s3/k1/f",
    "tma/64x128x64/g8/w4/s4/k1", "tma/128x128x64/g8/w8/s3/k1",
    "tma/128x256x64/g8/w8/s3/k1", "tma/128x256x64/g8/w8/s3/k1/f",
)  # fmt: skip


def main() -> int:
    name = torch.cuda.get_device_name()
    gpu = "h200" if "H200" in name else "h100" if "H100" in name else name.replace(" ", "-").lower()
    profile_path = ROOT / "profiles" / ("nvidia-h200.h5" if gpu == "h200" else "nvidia-h100-80gb-hbm3.h5")
    profile = load_profile(profile_path)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    start = time.perf_counter()
    errors = precompile([(GemmConfig.from_key(key), Problem(256, 256, 128, dtype="bf16")) for key in KEYS],
                        workers=min(8, os.cpu_count() or 1))  # fmt: skip
    print(f"precompile {time.perf_counter() - start:.0f} s, {len(errors)} errors", *errors[:3], sep="\n  ")
    timer = Timer()
    floors = timing_floors(timer)
    rows = []
    for m, n, k in SHAPES:
        times, _ = final_round(m, n, k, KEYS, BenchSettings(dtype="bf16", layout="nn"), timer, 800.0)
        timed = [key for key in KEYS if times.get(key) and math.isfinite(times[key])]
        # in a stream of work, as the model predicts: a flushed shape's times less its events' bracket
        flushed = flushed_timing(2 * (m * k + k * n + m * n), timer.l2)
        bracket = floors["flushed_ms"] - floors["graph_ms"] if flushed else 0.0
        predicted = Predictor(profile, [Timing(m, n, k, "nn", key, 1.0) for key in timed])({})
        for key, seconds in zip(timed, predicted, strict=True):
            cfg = GemmConfig.from_key(key)
            tiles = -(-m // cfg.block_m) * -(-n // cfg.tile_n)
            rows.append({"shape": [m, n, k], "config": key, "ms": times[key] - bracket, "raw_ms": times[key],
                         "predicted_ms": float(seconds) * 1e3, "tiles": tiles,
                         "tile_elems": cfg.block_m * cfg.tile_n, "torch_ms": times.get("torch")})  # fmt: skip
    out = Path(os.environ.get("OUT", ".")) / f"epilogue-tiles-{gpu}.json"
    meta = {"device": name, "profile": str(profile_path), "timing_floor": floors, "sms": sms}
    out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    print(f"{'shape':>16s} {'config':38s} {'meas us':>8s} {'pred us':>8s} {'meas/pred':>9s} {'us/tile/SM':>10s}")
    for r in rows:
        per = r["ms"] * 1e3 / (r["tiles"] / sms)
        print(f"{'x'.join(map(str, r['shape'])):>16s} {r['config']:38s} {r['ms'] * 1e3:8.1f} "
              f"{r['predicted_ms'] * 1e3:8.1f} {r['ms'] / r['predicted_ms']:9.2f} {per:10.2f}")  # fmt: skip
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
