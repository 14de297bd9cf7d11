"""Two tile shapes in one launch: does covering an output with equal-traffic tiles on every SM beat one tile shape?

dev072 1536x512x640 sits at 0.83-0.85x of torch.matmul on the H100 with every config of the space (6.0-6.3 us): its
64x128 tiles make 96 programs, each reading 240 KB of operands from L2, and 23.6 MB of L2-to-SM reads on 96 SMs
at the profile's 5.68 TB/s (``l2_bandwidth_vs_sms``) take 4.15 us, the K-loop's whole time beyond a one-step GEMM's
2.3 us floor.  Time = traffic / aggregate L2 bandwidth: a tile shape that fills all 132 SMs (6.89 TB/s) with less
traffic per output would be faster; 64x96 reads 205 KB, but 512 / 96 is not whole.  Here one kernel covers the first
C1 columns with region-1 tiles BM1 x (BN1A + BN1B) (a composite tile: two dots on one A tile) and the rest with
region-2 tiles BM2 x BN2: 1536x512 as 120 tiles of 64x96 and 12 of 128x32 is 132 programs of ~205 KB each.

Standalone kernel (nn, bf16, host-made descriptors, one program per tile, masked stores); its control is region 1
alone with the shipped tile (64x128), beside the sweep's three fastest shipped configs and torch.matmul, timed as
``validate`` times a shape.  Run on a GPU from the repository root (``$OUT/mixed-tiles-<gpu>.json``)::

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/mixed_tiles.py [NAME|MxNxK ...]
"""

import math
import sys
from typing import Any

import torch
import triton
import triton.language as tl
from harness import fastest, gpu_name, time_as_validate, validate_inputs, write_rows

from theodolite.kernels.benchmark import Timer

BK = 64
# (label, BM1, BN1A, BN1B, BM2, BN2, warps): region 1 covers the largest multiple of BN1A + BN1B columns
LAYOUTS = (
    ("64x128", 64, 128, 0, 64, 128, 4),  # control: the space's tile, one region where N is a multiple of 128
    ("64x96+128x32", 64, 64, 32, 128, 32, 4),
    ("64x96+64x32", 64, 64, 32, 64, 32, 4),
    ("128x48+128x32", 128, 32, 16, 128, 32, 4),
    ("64x96+128x32w8", 64, 64, 32, 128, 32, 8),
)
STAGES = (4, 5, 6, 7, 8)
DEFAULT = ("dev072",)


@triton.jit
def _tile(a_desc, b_desc, b1_desc, out_ptr, off_m, off_n, M, N, k_tiles, stride_om,
          BM: tl.constexpr, BN: tl.constexpr, BN1: tl.constexpr, BK: tl.constexpr):  # fmt: skip
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    if BN1 > 0:
        acc1 = tl.zeros((BM, BN1), dtype=tl.float32)
    for kk in range(k_tiles):
        a = a_desc.load([off_m, kk * BK])
        acc = tl.dot(a, b_desc.load([kk * BK, off_n]), acc)
        if BN1 > 0:
            acc1 = tl.dot(a, b1_desc.load([kk * BK, off_n + BN]), acc1)
    rows = off_m + tl.arange(0, BM)
    cols = off_n + tl.arange(0, BN)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    tl.store(out_ptr + rows[:, None] * stride_om + cols[None, :], acc.to(out_ptr.dtype.element_ty), mask=mask)
    if BN1 > 0:
        cols1 = off_n + BN + tl.arange(0, BN1)
        mask1 = (rows[:, None] < M) & (cols1[None, :] < N)
        tl.store(out_ptr + rows[:, None] * stride_om + cols1[None, :], acc1.to(out_ptr.dtype.element_ty), mask=mask1)


@triton.jit
def mixed_kernel(a1_desc, b1a_desc, b1b_desc, a2_desc, b2_desc, out_ptr, M, N, K, stride_om, C1, n1_tiles,
                 BM1: tl.constexpr, BN1A: tl.constexpr, BN1B: tl.constexpr, BM2: tl.constexpr, BN2: tl.constexpr,
                 BK: tl.constexpr):  # fmt: skip
    """Program ``pid`` < ``n1_tiles``: a region-1 tile of columns [0, C1); the others: region-2 tiles of [C1, N)."""
    pid = tl.program_id(0)
    k_tiles = tl.cdiv(K, BK)
    if pid < n1_tiles:
        cols = C1 // (BN1A + BN1B)
        _tile(a1_desc, b1a_desc, b1b_desc, out_ptr, (pid // cols) * BM1, (pid % cols) * (BN1A + BN1B), M, N,
              k_tiles, stride_om, BM1, BN1A, BN1B, BK)  # fmt: skip
    else:
        t = pid - n1_tiles
        cols2 = tl.cdiv(N - C1, BN2)
        _tile(a2_desc, b2_desc, b2_desc, out_ptr, (t // cols2) * BM2, C1 + (t % cols2) * BN2, M, N,
              k_tiles, stride_om, BM2, BN2, 0, BK)  # fmt: skip


def plan(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, layout: tuple[Any, ...], stages: int) -> Any:
    """A callable launching ``layout`` on A @ B -> out with ``stages`` pipeline stages (None where the layout does
    not apply: one region's width does not divide N and the layout is the control)."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    _, bm1, bn1a, bn1b, bm2, bn2, warps = layout
    m, k = a.shape
    n = b.shape[1]
    c1 = (n // (bn1a + bn1b)) * (bn1a + bn1b)
    if bn1b == 0 and c1 != n:
        return None
    n1 = math.ceil(m / bm1) * (c1 // (bn1a + bn1b))
    n2 = math.ceil(m / bm2) * math.ceil((n - c1) / bn2) if c1 < n else 0
    a1 = TensorDescriptor.from_tensor(a, [bm1, BK])
    b1a = TensorDescriptor.from_tensor(b, [BK, bn1a])
    b1b = TensorDescriptor.from_tensor(b, [BK, max(bn1b, 16)])
    a2 = TensorDescriptor.from_tensor(a, [bm2, BK])
    b2 = TensorDescriptor.from_tensor(b, [BK, bn2])
    args = (a1, b1a, b1b, a2, b2, out, m, n, k, out.stride(0), c1, n1)
    meta = dict(BM1=bm1, BN1A=bn1a, BN1B=bn1b, BM2=bm2, BN2=bn2, BK=BK, num_warps=warps, num_stages=stages)

    def run() -> None:
        mixed_kernel[(n1 + n2,)](*args, **meta)

    return run


def shapes(names: list[str]) -> list[tuple[str, int, int, int, list[str]]]:
    """(name, M, N, K, the sweep's three fastest configs) of named random-dev/llm shapes or MxNxK sizes."""
    from theodolite.results import load_results

    gpu = gpu_name()
    found = {}
    for suite in ("llm", "random-dev"):
        for s in load_results(f"reports/results/validate-{suite}-{gpu}.json").shapes:
            found[s.name] = (s.name, s.M, s.N, s.K, fastest(s.configs, 3))
    out = []
    for name in names:
        if name in found:
            out.append(found[name])
        else:
            m, n, k = map(int, name.split("x"))
            out.append((name, m, n, k, []))
    return out


def main() -> None:
    from harness import add_runs

    names = sys.argv[1:] or list(DEFAULT)
    timer = Timer()
    rows = []
    for name, m, n, k, best in shapes(names):
        inputs, sets, calls = validate_inputs(m, n, k, timer)
        ref = inputs.ref.float()
        add_runs(calls, sets, best, ref)
        for layout in LAYOUTS:
            for stages in STAGES:
                label = f"{layout[0]}/s{stages}"
                try:
                    runs = [plan(x, y, o, layout, stages) for x, y, o in sets]
                    if runs[0] is None:
                        continue
                    sets[0][2].fill_(float("nan"))
                    runs[0]()
                    torch.cuda.synchronize()
                except Exception as error:  # noqa: BLE001 - out of shared memory etc.: said, skipped
                    print(name, label, "failed:", type(error).__name__, str(error)[:120], flush=True)
                    continue
                err = ((sets[0][2].float() - ref).abs().max() / ref.abs().max()).item()
                if not err < 1e-2:
                    print(name, label, "wrong result", err, flush=True)
                    continue
                calls[label] = runs
        times = time_as_validate(timer, inputs, calls)
        for c, t in times.items():
            rows.append({"shape": name, "M": m, "N": n, "K": k, "config": c, "us": t * 1e3, "sweep": c in best})
        torch_us = times["torch"] * 1e3
        print(f"{name} {m}x{n}x{k}: torch {torch_us:.2f} us", flush=True)
        for c, t in sorted(times.items(), key=lambda kv: kv[1]):
            print(f"  {t * 1e3:7.2f} us  x{times['torch'] / t:.3f}  {c}", flush=True)
    path = write_rows(f"mixed-tiles-{gpu_name()}", "PYTHONPATH=$PWD OUT=$OUT python3 "
                      "experiments/mixed_tiles.py " + " ".join(names), rows)  # fmt: skip
    print("wrote", path, file=sys.stderr)


if __name__ == "__main__":
    main()
