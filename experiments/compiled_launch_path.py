"""Inside a compiled graph, how much host time does a projection save when Inductor launches the Triton kernel itself?

A projection of ours inside a `torch.compile` graph costs the host 23.2 µs against F.linear's 18.4 (H200 host,
`bench-linear --compile-layers 8`): Inductor calls `theodolite::linear` through the dispatcher into Python, which
looks up its runner and launches the kernel through Triton's launcher.  `torch.library.triton_op` makes an operator
whose body Inductor traces, so the generated code launches the kernel itself (no Python impl per call).  This times,
per projection, eight chained `Linear(D, D)` layers at M tokens, bf16, compiled with `fullgraph=True` under
`torch.no_grad()`, host-bound (the GPU's share is a few µs): F.linear; theodolite's patched layers; one simple Triton
GEMM kernel (the same kernel both ways, one config) behind (a) a `torch.library.custom_op` that launches it from
Python and (b) a `torch.library.triton_op` that wraps it with `wrap_triton`.  (a) - (b) is what the launch path costs;
(b) against F.linear what is left.  Run on a GPU from the repository root::

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/compiled_launch_path.py    # $OUT/compiled-launch-path-<gpu>.json

Since `theodolite.traced_ops`, a fifth way: our patched layers with its switch on (`theodolite::linear_traced`, the
picks' kernels launched by Inductor); to be run.

Measured (H200, one GPU; `compiled-launch-path-h200.json`, before that way), µs of host wall time per projection,
M = 1 / 8 / 64:
F.linear 23.6 / 21.9 / 34.7, theodolite 31.3 / 30.0 / 52.1, custom_op 62.7 / 61.4 / 110.1, triton_op 18.4 / 29.7 /
24.8.  The Python launch path is what costs: behind a `triton_op` the same kernel costs the host less than F.linear at
M 1 and 64 (its M = 8 figure, equal to ours, is one run's and unexplained), where the `custom_op` costs twice our
trimmed operator and ours 1.3-1.5x F.linear.  All outputs within bf16 rounding of F.linear's.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import torch
import triton
import triton.language as tl
from harness import gpu_name, write_rows

LAYERS = 8
WIDTH = 1024
TOKENS = (1, 8, 64)
CALLS = 300


@triton.jit
def _gemm_nt(x_ptr, w_ptr, o_ptr, M, N, K, sx, sw, so,
             BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):  # fmt: skip
    """O = X W^T for row-major X [M, K] and W [N, K]: one BM x BN tile a program, masked edges."""
    rm = tl.program_id(1) * BM + tl.arange(0, BM)
    rn = tl.program_id(0) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        x = tl.load(x_ptr + rm[:, None] * sx + (k + rk)[None, :], mask=(rm[:, None] < M) & ((k + rk)[None, :] < K),
                    other=0.0)  # fmt: skip
        w = tl.load(w_ptr + rn[None, :] * sw + (k + rk)[:, None], mask=(rn[None, :] < N) & ((k + rk)[:, None] < K),
                    other=0.0)  # fmt: skip
        acc = tl.dot(x, w, acc)
    tl.store(o_ptr + rm[:, None] * so + rn[None, :], acc.to(o_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))  # fmt: skip


BM, BN, BK = 16, 64, 128


def _grid(m: int, n: int) -> tuple[int, int]:
    return (triton.cdiv(n, BN), triton.cdiv(m, BM))


@torch.library.custom_op("theodolite_experiment::gemm_opaque", mutates_args=())
def gemm_opaque(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """The kernel launched from Python at every call (what `theodolite::linear` does, less its runner lookup)."""
    m, k = x.shape
    n = w.shape[0]
    out = torch.empty((m, n), device=x.device, dtype=x.dtype)
    _gemm_nt[_grid(m, n)](x, w, out, m, n, k, x.stride(0), w.stride(0), out.stride(0), BM=BM, BN=BN, BK=BK)
    return out


@gemm_opaque.register_fake
def _gemm_opaque_fake(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return x.new_empty((x.shape[0], w.shape[0]))


@torch.library.triton_op("theodolite_experiment::gemm_traced", mutates_args=())
def gemm_traced(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """The same kernel, traced: Inductor's generated code launches it."""
    m, k = x.shape
    n = w.shape[0]
    out = torch.empty((m, n), device=x.device, dtype=x.dtype)
    torch.library.wrap_triton(_gemm_nt)[_grid(m, n)](x, w, out, m, n, k, x.stride(0), w.stride(0), out.stride(0),
                                                     BM=BM, BN=BN, BK=BK)  # fmt: skip
    return out


class _Chain(torch.nn.Module):
    def __init__(self, weights: list[torch.Tensor], gemm: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]):
        super().__init__()
        self.weights = weights
        self.gemm = gemm

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for w in self.weights:
            x = self.gemm(x, w)
        return x


def _per_projection_us(model: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> float:
    """Wall time of CALLS chained passes over their projections, after warm-up (host-bound: the GPU keeps up)."""
    for _ in range(20):
        model(x)
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(CALLS):
            model(x)
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - start) / (CALLS * LAYERS) * 1e6)
    return best


def main() -> None:
    import theodolite

    torch.manual_seed(0)
    weights = [torch.randn(WIDTH, WIDTH, device="cuda", dtype=torch.bfloat16) / WIDTH**0.5 for _ in range(LAYERS)]
    linears = torch.nn.Sequential(*[torch.nn.Linear(WIDTH, WIDTH, bias=False) for _ in range(LAYERS)])
    linears = linears.to("cuda", torch.bfloat16).requires_grad_(False)
    for layer, w in zip(linears, weights, strict=True):
        layer.weight.copy_(w)
    ours = torch.nn.Sequential(*[torch.nn.Linear(WIDTH, WIDTH, bias=False) for _ in range(LAYERS)])
    ours = ours.to("cuda", torch.bfloat16).requires_grad_(False)
    ours.load_state_dict(linears.state_dict())
    assert len(theodolite.patch(ours)) == LAYERS
    ways = {
        "F.linear": linears,
        "theodolite": ours,
        "theodolite traced": ours,  # the same layers with theodolite.traced_ops switched on (theodolite::linear_traced)
        "custom_op": _Chain(weights, gemm_opaque),
        "triton_op": _Chain(weights, gemm_traced),
    }
    rows = []
    with torch.no_grad():
        for m in TOKENS:
            x = torch.randn(m, WIDTH, device="cuda", dtype=torch.bfloat16)
            ref = linears(x)
            row: dict[str, float | int | str] = {"M": m}
            for name, module in ways.items():
                theodolite.ops._traced.ENABLED = name == "theodolite traced"
                try:
                    compiled = torch.compile(module, fullgraph=True)
                    error = (compiled(x).float() - ref.float()).abs().max().item() / ref.float().abs().max().item()
                    row[f"{name} us"] = _per_projection_us(compiled, x)
                    row[f"{name} error"] = error
                except Exception as failure:  # a way that does not compile or run: say why, time the others
                    row[f"{name} us"], row[f"{name} error"] = math.nan, f"{type(failure).__name__}: {failure}"[:300]
                torch._dynamo.reset()
            theodolite.ops._traced.ENABLED = False
            rows.append(row)
            print(f"M={m}: " + ", ".join(f"{n} {row[f'{n} us']:.1f} us (err {row[f'{n} error']})" for n in ways),
                  flush=True)  # fmt: skip
    command = "PYTHONPATH=$PWD OUT=$OUT python3 experiments/compiled_launch_path.py"
    print("wrote", write_rows(f"compiled-launch-path-{gpu_name()}", command, rows, layers=LAYERS, width=WIDTH))


if __name__ == "__main__":
    main()
