"""Per-K-step time of one program on its SM, by tile shape and stage count, with the operands in L2 or in HBM
(H100/H200, bf16, persistent kernel, aligned "nn" operands).

The 16-row tiles (the synchronous matrix path) stepped near twice as slow as the model says on dev130, and two
resident programs did not overlap their steps (``small_tile_steps.py``).  Here each tile is timed at K and K/2 and
the difference over the extra K-steps is its step time, in three settings:

- ``l2x1``: a batch of 66 products broadcasting one A (BM x K) and one B (K x BN): 66 programs, one per SM, all
  reading the same few MB from L2 (no HBM stream, no bandwidth limit of the memory system);
- ``l2x2``: the same with a batch of twice the SMs: two programs per SM (where shared memory lets two reside; their
  aggregate L2 traffic may reach the L2 bandwidth, so compare ``l2_tbps``);
- ``hbm``: one product of M = 66 x BM distinct rows (A streamed from HBM), N = BN: one program per SM.

Run on a GPU from the repository root (writes ``$OUT/tile-steps.json``):

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/tile_steps.py

``TILE_STEPS_TILES`` / ``_STAGES`` / ``_SETTINGS`` / ``_K`` (two K, e.g. "8193,4097": odd K leaves A's rows
misaligned, so A is read element-wise) / ``_FILE`` narrow a run; setting ``l2x3`` (three programs per SM) runs where
three fit.  With odd K set
``THEODOLITE_ALIGN_COPY_MIN_FLOPS=1e30`` so that gemm() does not copy A to an aligned buffer first.
"""

import json
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

import torch
import triton

TILES: list[tuple[int, ...]] = [  # (BM, BN, BK, warps)
    (16, 64, 64, 4), (16, 64, 128, 4), (16, 128, 64, 4), (16, 128, 128, 4), (32, 64, 64, 4), (32, 64, 128, 4),
    (32, 128, 64, 4), (64, 32, 128, 4), (64, 64, 64, 4), (64, 64, 128, 4), (64, 128, 64, 4), (128, 64, 64, 4),
    (128, 128, 64, 8),
]  # fmt: skip
STAGES: tuple[int, ...] = (2, 3, 4, 5)
if os.environ.get("TILE_STEPS_TILES"):  # e.g. "16x64x128x4,64x64x64x4": BM x BN x BK x warps
    TILES = [tuple(int(v) for v in t.split("x")) for t in os.environ["TILE_STEPS_TILES"].split(",")]
if os.environ.get("TILE_STEPS_STAGES"):
    STAGES = tuple(int(v) for v in os.environ["TILE_STEPS_STAGES"].split(","))
PROGRAMS = 66
SMS = torch.cuda.get_device_properties(0).multi_processor_count if torch.cuda.is_available() else 132
K_FULL, K_HALF = (int(v) for v in os.environ.get("TILE_STEPS_K", "8192,4096").split(","))  # odd K: A misaligned
PER_SM = {"l2x1": 0, "l2x2": 2, "l2x3": 3, "hbm": 0}  # 0: PROGRAMS programs, one per SM
SMEM_LIMIT = 227 * 1024


def config(tile: tuple[int, ...], stages: int):  # noqa: ANN201
    """The persistent config of a (BM, BN, BK, warps) tile."""
    from theodolite.kernels.config import GemmConfig

    return GemmConfig("persistent", tile[0], tile[1], tile[2], num_warps=tile[3], num_stages=stages)


def inputs(setting: str, bm: int, bn: int, k: int, device: str):  # noqa: ANN201
    gen = torch.Generator(device=device).manual_seed(bm * 1000 + bn + k)
    if setting == "hbm":
        a = torch.randn(PROGRAMS * bm, k, device=device, generator=gen).to(torch.bfloat16)
        b = torch.randn(k, bn, device=device, generator=gen).to(torch.bfloat16)
        return a, b, torch.empty(PROGRAMS * bm, bn, device=device, dtype=torch.bfloat16)
    batch = PER_SM[setting] * SMS or PROGRAMS
    a = torch.randn(bm, k, device=device, generator=gen).to(torch.bfloat16).expand(batch, bm, k)
    b = torch.randn(k, bn, device=device, generator=gen).to(torch.bfloat16).expand(batch, k, bn)
    return a, b, torch.empty(batch, bm, bn, device=device, dtype=torch.bfloat16)


def warm(jobs: list[tuple]) -> list[str]:
    """Compile in a worker process (Triton's disk cache serves the main process afterwards)."""
    from theodolite.kernels.launch import plan_gemm

    errors = []
    for tile, stages, setting in jobs:
        try:
            a, b, out = inputs(setting, tile[0], tile[1], 256, "cuda")
            plan_gemm(a, b, config(tile, stages), out=out).run()
            torch.cuda.synchronize()
        except Exception as error:  # reported, the main loop skips it too
            errors.append(f"{tile} s{stages} {setting}: {type(error).__name__}: {str(error)[:120]}")
    return errors


def main() -> None:
    from theodolite.kernels.benchmark import Timer
    from theodolite.kernels.config import programs_per_sm, smem_bytes
    from theodolite.kernels.launch import device_limits, plan_gemm

    limits = device_limits(torch.device("cuda"))
    cases = []
    for tile in TILES:
        for stages in STAGES:
            c = config(tile, stages)
            if smem_bytes(c, "bf16") > SMEM_LIMIT:
                continue
            fit = programs_per_sm(c, "bf16", limits)
            for setting in os.environ.get("TILE_STEPS_SETTINGS", "l2x1,l2x2,hbm").split(","):
                if PER_SM[setting] <= fit:
                    cases.append((tile, stages, setting))
    chunks = [cases[i::12] for i in range(12)]
    with ProcessPoolExecutor(12, mp_context=get_context("spawn")) as pool:
        for errors in pool.map(warm, chunks):
            for error in errors:
                print("compile:", error, flush=True)
    timer = Timer()
    rows = []
    for tile, stages, setting in cases:
        c = config(tile, stages)
        times = {}
        for k in (K_FULL, K_HALF):
            a, b, out = inputs(setting, tile[0], tile[1], k, "cuda")
            try:
                plan = plan_gemm(a, b, c, out=out)
                plan.run()
            except Exception as error:
                print("skip", c.key, setting, type(error).__name__, str(error)[:100], flush=True)
                break
            if k == K_FULL:
                ref = torch.matmul(a[:2].float(), b[:2].float()) if a.dim() == 3 else a.float() @ b.float()
                got = out[:2].float() if out.dim() == 3 else out.float()
                err = ((got - ref).abs().max() / ref.abs().max()).item()
                if not err < 1e-2:
                    print("wrong", c.key, setting, err, flush=True)
                    break
            times[k] = timer.interleaved([[plan.run]], keep=[0])[0] * 1e3
        if len(times) < 2:
            continue
        steps = -(-K_FULL // tile[2]) - -(-K_HALF // tile[2])
        row = {"tile": "x".join(map(str, tile[:3])), "warps": tile[3], "stages": stages, "setting": setting,
               "t_full_us": times[K_FULL], "t_half_us": times[K_HALF],
               "step_us": (times[K_FULL] - times[K_HALF]) / steps,
               "fixed_us": times[K_HALF] - (times[K_FULL] - times[K_HALF]) / steps * -(-K_HALF // tile[2]),
               "step_bytes": (tile[0] + tile[1]) * tile[2] * 2}  # fmt: skip
        row["gbps"] = row["step_bytes"] / row["step_us"] / 1e3
        row["l2_tbps"] = row["gbps"] * (PER_SM[setting] * SMS or PROGRAMS) / 1e3
        rows.append(row)
        print(f"{row['tile']:11s} w{tile[3]} s{stages} {setting:5s} step {row['step_us']:.3f} us ({row['gbps']:5.1f} "
              f"GB/s, all {row['l2_tbps']:4.1f} TB/s)  fixed {row['fixed_us']:5.2f} us", flush=True)  # fmt: skip
    out_path = os.path.join(os.environ.get("OUT", "."), os.environ.get("TILE_STEPS_FILE", "tile-steps.json"))
    with open(out_path, "w") as stream:
        json.dump({"device": torch.cuda.get_device_name(), "triton": triton.__version__, "torch": torch.__version__,
                   "command": "PYTHONPATH=$PWD OUT=$OUT python3 experiments/tile_steps.py",
                   "programs": PROGRAMS, "k": [K_FULL, K_HALF],
                   "env": {k: v for k, v in os.environ.items() if k.startswith(("TILE_STEPS_", "THEODOLITE_"))},
                   "rows": rows}, stream, indent=1)  # fmt: skip
    print("wrote", out_path, file=sys.stderr)


if __name__ == "__main__":
    main()
