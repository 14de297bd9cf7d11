"""Would decode run faster as the transposed problem, the weight's rows on the tile's 64-row side?

At M <= 64 the bundled tiles put the tokens on the rows: a 64-row fp8 tile (fp8's matrix instructions want 64 rows)
reads 64 rows of A of which M are real, and every stage holds them in shared memory beside the weight's panel.  As
C^T = W X^T (layout nt stays nt: the weight [N, K] is the new A, row-major; the tokens the new B, K-major) the
weight fills the 64-row side and the tokens the 32-column one, so a stage holds two to four times the weight bytes
for the same shared memory.  This times every legal config of the transposed decode suite (M' = N, N' = M, K; the
transposed output is C^T, stored row-major: the comparison leaves out the transposed store) beside the plain decode
suite, fp8 e4m3 and bf16, with `validate` (sweeps only).

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/decode_transposed.py    # GPU (two GPUs: fp8 and bf16 side by side)
    PYTHONPATH=$PWD python3 experiments/decode_transposed.py --summary PLAIN.json TRANSPOSED.json [OUT.json]

H200, 2026-11-29 (``experiments/decode-transposed-h200.json``, the per-shape bests of both sweeps): no.  bf16, all 84
shapes: the best config against torch.matmul 1.001x (min 0.920) plain, 1.004x (min 0.927) with the transposed
problem's best where it wins; the transposed best's speed over the plain one's 0.94-1.05x at M 2-64, 0.65-0.98x at
M = 1 (one token is a one-column B).  fp8 e4m3 (the first 22 shapes, the call's budget): 0.959x -> 0.966x, the min
unchanged (llama3-8b.o, 8.2 µs plain against ``_scaled_mm``'s 7.2; transposed 8.6-9.0; 0.91-1.02x at M 2-64,
0.31-0.58x at M = 1).  Not built: at equal bytes in flight the weight streams no faster from the other side.
"""

from __future__ import annotations

import json
import math
import os
import shlex
import subprocess
import sys

DTYPES = (("0", "fp8e4m3"), ("1", "bf16"))


def write_csv(path: str) -> None:
    from theodolite.kernels.shapes import load_suite

    with open(path, "w") as f:
        f.write("name,M,N,K\n")
        for name, m, n, k in load_suite("decode"):
            f.write(f"{name}.T,{n},{m},{k}\n")


def run(out: str) -> None:
    csv = os.path.join(out, "decode-transposed.csv")
    write_csv(csv)
    base = [sys.executable, "-m", "theodolite", "validate", "--layout", "nt", "--peers", "", "--no-final"]
    jobs = []
    for gpu, dtype in DTYPES:
        commands = [
            shlex.join([*base, "--shapes", shapes, "--dtype", dtype, "-o", os.path.join(out, f"{tag}-{dtype}.json")])
            for shapes, tag in ((csv, "transposed"), ("decode", "plain"))
        ]
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": gpu}
        jobs.append(subprocess.Popen(" && ".join(commands), shell=True, env=env))
    for job in jobs:
        job.wait()


def summary(plain_path: str, transposed_path: str, out_path: str | None = None) -> None:
    """Per plain decode shape: torch, the best plain config, the best transposed one (µs)."""
    from theodolite.results import load_results

    plain = {s.name: s for s in load_results(plain_path).shapes}
    transposed = {s.name.removesuffix(".T"): s for s in load_results(transposed_path).shapes}
    rows = []
    for name, shape in plain.items():
        other = transposed.get(name)
        timed = {k: v for k, v in shape.configs.items() if v}
        timed_t = {k: v for k, v in other.configs.items() if v} if other else {}
        if not timed or not timed_t or not shape.torch_ms:
            continue
        best, best_t = min(timed, key=timed.__getitem__), min(timed_t, key=timed_t.__getitem__)
        rows.append(dict(name=name, torch_us=shape.torch_ms * 1e3, plain_us=timed[best] * 1e3, plain=best,
                         transposed_us=timed_t[best_t] * 1e3, transposed=best_t))  # fmt: skip
    for r in rows:
        ratio = r["plain_us"] / r["transposed_us"]
        print(f"{r['name']:28s} torch {r['torch_us']:7.2f}  plain {r['plain_us']:7.2f}  transposed "
              f"{r['transposed_us']:7.2f}  {ratio:5.2f}x  {r['plain']:36s} {r['transposed']}")  # fmt: skip
    if not rows:
        return
    plain_logs = [math.log(r["torch_us"] / r["plain_us"]) for r in rows]
    either_logs = [math.log(r["torch_us"] / min(r["plain_us"], r["transposed_us"])) for r in rows]
    print(f"{len(rows)} shapes, best against torch: plain {math.exp(sum(plain_logs) / len(rows)):.3f}x "
          f"(min {math.exp(min(plain_logs)):.3f}), either {math.exp(sum(either_logs) / len(rows)):.3f}x "
          f"(min {math.exp(min(either_logs)):.3f})")  # fmt: skip
    if out_path:
        with open(out_path, "w") as f:
            json.dump({"plain": plain_path, "transposed": transposed_path, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--summary":
        summary(*sys.argv[2:5])
    else:
        run(os.environ.get("OUT", "."))
