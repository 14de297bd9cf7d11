"""How long is an element-wise K-step at small M, by loads per thread and programs per SM?

With B's rows misaligned (layout nt, odd K) the kernels load B element by element, synchronously (no pipeline).  The
model prices such a K-step by its loads (``model_scalar_load_cost`` per element, the SM's programs in turn), while on
the H200 10x101928x11757 took about the same time per step per SM whatever the loads (docs/model.md, known defects).
This times weight streams (N 16384, K 4095 and 8191, odd) at M 8, 64 and 512 through configs of 1-4 programs per SM
and 10-80 loads a thread (``python -m theodolite bench --config``, bf16 nt), and sets the time per K-step of a wave (the
slope between the two K, over the waves) beside the model's.

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/elementwise_steps.py            # GPU: $OUT/elementwise-steps.json
    PYTHONPATH=$PWD python3 experiments/elementwise_steps.py --summary F.json PROFILE   # no GPU

H200 (`elementwise-steps-h200.json`, ~25 s; bundled profile after 2026-11-28): at M 8 and 64 (B element-wise, A
copied: load class scalar-b) a wave's K-step takes 0.90-1.22 us with 8-32 of B's loads a thread and 1.46-1.56 with
64 (two programs per SM; 1.97 for 32x128x64 alone on its SM), about 0.8 us plus 0.012 us a load.  The model prices
0.58-0.76 us at 8-16 loads and 2.64 at 64 (16x64x128: 0.55-0.59 of its time), so it ranks BLOCK_K 16-32 ahead of
128 where the measured order is the reverse per K (16x64x16 takes 7.4 us per 128 of K, 16x64x128 1.56).  The
profile's scalar probes time A's rows along K (nn) and B's along N; B's rows along K (nt, an nn.Linear weight of
odd K) are not probed.  At M = 512 gemm() copies B (vector loads) and the model reads 0.69-1.58 of the times.
"""

from __future__ import annotations

import json
import math
import os
import sys

KS = (4095, 8191)
SHAPES = [(f"m{m}k{k}", m, 16384, k) for m in (8, 64, 512) for k in KS]
KEYS = (
    "persistent/16x64x16/g8/w4/s2/k1", "persistent/16x64x32/g8/w4/s2/k1", "persistent/16x64x128/g8/w4/s4/k1",
    "persistent/32x128x64/g8/w4/s4/k1", "persistent/64x32x128/g8/w4/s4/k1", "persistent/64x64x32/g8/w4/s2/k1",
    "persistent/64x64x64/g8/w4/s4/k1", "streamk/64x64x64/g8/w4/s4/k1",
)  # fmt: skip


def run(out: str) -> None:
    from harness import bench_configs

    bench_configs(SHAPES, KEYS, os.path.join(out, "elementwise-steps.json"), "bf16", "nt")


def summary(path: str, profile_path: str) -> None:
    """Per config and M: loads a thread per K-step, programs per SM, waves, and the K-step of a wave (us), measured
    against the model (the same slope of its predicted times)."""
    from theodolite.kernels.config import GemmConfig, Problem
    from theodolite.model.predict import alignment_and_loads, evaluate, table_for

    from theodolite.profile.hdf5 import load_profile

    with open(path) as stream:
        shapes = json.load(stream)["shapes"]
    table = table_for(load_profile(profile_path), "bf16")
    by = {(s["M"], s["K"]): s["configs"] for s in shapes}
    print("config                              M  loads    B loads/thr  per SM  waves  step us measured  model  ratio")
    for m in sorted({m for m, _ in by}):
        (t1, terms), (t2, _) = (evaluate(table, Problem(m, 16384, k, layout="nt"), detail=True) for k in KS)
        loads_class = alignment_and_loads(Problem(m, 16384, KS[0], layout="nt"), table.hw)[3]
        for key in KEYS:
            cfg = GemmConfig.from_key(key)
            ms = [by.get((m, k), {}).get(key) for k in KS]
            if key not in table.index or not all(v and math.isfinite(v) for v in ms):
                continue
            i = table.index[key]
            steps = -(-KS[1] // cfg.block_k) - -(-KS[0] // cfg.block_k)
            waves = float(terms["#waves"][i])
            loads = cfg.block_n * cfg.block_k / (cfg.num_warps * 32)  # B's elements per thread
            measured = (ms[1] - ms[0]) * 1e3 / steps / waves  # type: ignore[operator]
            model = float(t2[i] - t1[i]) * 1e6 / steps / waves
            print(f"{key:34s} {m:4d} {loads_class:8s} {loads:6.0f} {terms['#resident_per_sm'][i]:12.0f} {waves:6.0f}  "
                  f"{measured:8.3f}        {model:6.3f}  {measured / model:5.2f}")  # fmt: skip


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--summary":
        summary(sys.argv[2], sys.argv[3])
    else:
        run(os.environ.get("OUT", "."))
