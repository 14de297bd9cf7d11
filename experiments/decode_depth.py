"""Decode on small weights: do deeper pipelines or narrower tiles stream 16-48 MB of weights faster?

On the H200 the fp8 decode suite's best config read llama3-8b.o (4096x4096, 16 MB) at 0.82-0.92x of
``torch._scaled_mm`` (8.7 us against 7.4): one 64x32x256 program per SM, four stages, keeps ~100 KB of loads in
flight.  This times, with ``python -m theodolite bench`` (every config side by side with the torch baseline, inputs
rotated through L2 or L2-flushed as ``validate`` times them), configs off the space beside the space's best of those
shapes: 64-row tiles six to twelve stages deep, split-K over 64x32 and 64x16 tiles, TMA tiles; fp8 e4m3 and bf16, layout
nt (nn.Linear's ``x @ W.t()``).

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/decode_depth.py          # GPU: $OUT/decode-depth-{fp8e4m3,bf16}.json
    python3 experiments/decode_depth.py --summary F.json ...               # no GPU: per shape, torch / space / new

H200, 2026-11-28 (``experiments/decode-depth-{fp8e4m3,bf16}-h200.json``): fp8 llama3-8b.o M 1-32 64x32x256 s4
8.70-9.09 us -> s6 8.08-8.23 (``_scaled_mm`` 7.2-7.7), qkv (6144x4096) 64x64x128 s12 10.19 -> 64x64x256 s6 9.84
(9.67); bf16 qkv M 32 and 64 64x64x128 s6 19.5 and 18.1 against the space's 20.7 and 18.8 (torch 18.6, 18.0), o M=64
64x32x128 s6 14.6 (15.6; torch 14.1). Split-K over 64x32 tiles gained nothing, 64x16 tiles lost (12-18 us). The two
six-stage tiles joined the decode family (``kernels.config._DECODE_PERSISTENT``). Seven and eight stages, 64x32x512
and 64x32x128 at 16 stages were slower on llama3-8b.o (8.29-9.25 us, ``decode-depth-deeper-h200.json``, the same
command with those keys). Over the whole fp8 decode suite (the two beside three of the sweep's configs,
``decode-depth-fp8e4m3-suite-h200.json``) they are the fastest of the five on 42 of 84 shapes; validated again with
them in the space (``reports/results/validate-decode-fp8e4m3-nt-h200.json``) the suite's best against ``_scaled_mm``
is 1.003x (min 0.899), 0.989x (min 0.817) before.
"""

from __future__ import annotations

import json
import os
import sys

SHAPES = {
    "fp8e4m3": [("llama3-8b.o", m, 4096, 4096) for m in (1, 8, 32, 64)]
    + [("llama3-8b.qkv", m, 6144, 4096) for m in (1, 16, 64)]
    + [("llama3-8b.down", 8, 4096, 14336)],
    "bf16": [("llama3-8b.o", m, 4096, 4096) for m in (8, 32, 64)]
    + [("llama3-8b.qkv", m, 6144, 4096) for m in (32, 64)]
    + [("llama3-70b.qkv", 64, 10240, 8192)],
}
# the space's best configs of those shapes in the committed sweeps first, then the candidates off the space
CONFIGS = {
    "fp8e4m3": (
        "persistent/64x32x256/g8/w4/s4/k1", "persistent/64x64x128/g8/w4/s12/k1", "splitk/64x64x128/g8/w4/s8/k2",
        "splitk/16x64x512/g8/w4/s3/k2", "persistent/64x64x128/g8/w4/s8/k1", "tma/64x64x256/g8/w4/s4/k1/f",
        "persistent/64x32x256/g8/w4/s6/k1", "persistent/64x32x128/g8/w4/s8/k1", "persistent/64x32x128/g8/w4/s12/k1",
        "splitk/64x32x256/g8/w4/s4/k2", "splitk/64x32x256/g8/w4/s4/k4", "splitk/64x32x128/g8/w4/s8/k2",
        "splitk/64x32x128/g8/w4/s8/k4", "persistent/64x16x256/g8/w4/s6/k1", "splitk/64x16x256/g8/w4/s4/k2",
        "persistent/64x64x256/g8/w4/s6/k1", "splitk/64x64x256/g8/w4/s4/k2", "tma/64x32x256/g8/w4/s6/k1",
        "tma/64x64x128/g8/w4/s8/k1",
    ),
    "bf16": (
        "persistent/16x64x256/g8/w4/s4/k1", "persistent/16x128x128/g8/w4/s6/k1", "persistent/64x64x64/g8/w4/s12/k1",
        "splitk/64x64x64/g8/w4/s8/k2", "persistent/32x64x128/g8/w4/s4/k1",
        "persistent/64x32x128/g8/w4/s6/k1", "persistent/64x32x64/g8/w4/s12/k1", "splitk/64x32x128/g8/w4/s4/k2",
        "splitk/64x32x64/g8/w4/s8/k2", "persistent/32x32x128/g8/w4/s6/k1", "splitk/32x64x128/g8/w4/s4/k2",
        "tma/64x32x128/g8/w4/s6/k1", "tma/64x64x64/g8/w4/s12/k1", "persistent/64x64x128/g8/w4/s6/k1",
    ),
}
SPACE_FIRST = {"fp8e4m3": 6, "bf16": 5}  # how many of CONFIGS[dtype] are the space's


def run(out: str) -> None:
    from harness import bench_configs

    for dtype, shapes in SHAPES.items():
        path = os.path.join(out, f"decode-depth-{dtype}.json")
        bench_configs(shapes, CONFIGS[dtype], path, dtype, "nt")
        summary([path])


def summary(paths: list[str]) -> None:
    for path in paths:
        with open(path) as stream:
            data = json.load(stream)
        dtype = data["shapes"][0]["dtype"]
        space = set(CONFIGS[dtype][: SPACE_FIRST[dtype]])
        print(path)
        for s in data["shapes"]:
            timed = {k: v for k, v in s["configs"].items() if v}
            old = min((v, k) for k, v in timed.items() if k in space)
            new = min((v, k) for k, v in timed.items() if k not in space)
            shape = f"{s['name']} {s['M']}x{s['N']}x{s['K']}"
            print(f"  {shape}: torch {s['torch_ms'] * 1e3:.2f} us, space {old[0] * 1e3:.2f} ({old[1]}), "
                  f"candidates {new[0] * 1e3:.2f} ({new[1]})")  # fmt: skip


if __name__ == "__main__":
    if sys.argv[1:2] == ["--summary"]:
        summary(sys.argv[2:])
    else:
        run(os.environ.get("OUT", "."))
