"""Host time per call of ``theodolite.matmul`` with fp8 inputs, scaled and unscaled, on the CPU, the launch stubbed.

Does a call with per-tensor scales take the launch cache like an unscaled one?  The kernel launch is stubbed as in
``linear_host_path.py`` (every line of Python between the call and the driver's launch runs; the launch itself and
CUDA's allocator differ), on the Llama-3-8B projections at M tokens, fp8 e4m3 (B = ``w.t()`` of an ``[N, K]``
weight, layout nt), the bundled H100 profile's picks; bf16, fp16 and tf32 (fp32 inputs) beside it.

    PYTHONPATH=$PWD python3 experiments/fp8_host_path.py [M]

Prints microseconds per call (median of rounds) per entry point and the number of plans ``plan_gemm`` made during
the timed calls (0: every call hit the launch cache).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

os.environ["TRITON_INTERPRET"] = "1"  # plan_gemm accepts CPU tensors; no kernel runs (the launches are stubbed)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
from linear_host_path import per_call_us, stub_launches  # noqa: E402
from theodolite.kernels import launch  # noqa: E402

from theodolite import matmul  # noqa: E402
from theodolite.bench_linear import PROJECTIONS  # noqa: E402


def counting_plans() -> list[int]:
    """Count plan_gemm calls (a miss of the launch cache makes one)."""
    count = [0]
    plan = launch.plan_gemm

    def counted(*args: Any, **kwargs: Any) -> Any:
        count[0] += 1
        return plan(*args, **kwargs)

    launch.plan_gemm = counted  # type: ignore[assignment]
    return count


def main() -> None:
    m = int(sys.argv[1]) if len(sys.argv) > 1 else 16
    stub_launches()
    plans = counting_plans()
    rows = []
    for name, k, n in PROJECTIONS:
        x = torch.randn(m, k)
        w = torch.randn(n, k)
        xb, wb = x.to(torch.bfloat16), w.to(torch.bfloat16)
        xh, wh = x.to(torch.float16), w.to(torch.float16)
        xq, wq = x.to(torch.float8_e4m3fn), w.to(torch.float8_e4m3fn)
        sa, sb = torch.tensor(0.5), torch.tensor(2.0)
        entries: dict[str, Callable[[], Any]] = {
            "bf16 matmul(x, W.t())": lambda x=xb, w=wb: matmul(x, w.t()),
            "fp16 matmul(x, W.t())": lambda x=xh, w=wh: matmul(x, w.t()),
            "tf32 matmul(x, W.t())": lambda x=x, w=w: matmul(x, w.t()),
            "fp8 unscaled": lambda x=xq, w=wq: matmul(x, w.t()),
            "fp8 scale_a, scale_b tensors": lambda x=xq, w=wq, sa=sa, sb=sb: matmul(x, w.t(), scale_a=sa, scale_b=sb),
            "fp8 scale_a tensor": lambda x=xq, w=wq, sa=sa: matmul(x, w.t(), scale_a=sa),
            "fp8 scales floats": lambda x=xq, w=wq: matmul(x, w.t(), scale_a=0.5, scale_b=2.0),
        }
        with torch.no_grad():
            for entry, fn in entries.items():
                fn()
                before = plans[0]
                us = per_call_us(fn, calls=300, rounds=5)
                rows.append((name, entry, us, plans[0] - before))
    print(f"host us per call, CPU, kernel launch stubbed, M={m}, torch {torch.__version__}")
    print(f"{'proj':>8} {'entry':<32} {'us':>8} {'plans':>6}")
    for name, entry, us, count in rows:
        print(f"{name:>8} {entry:<32} {us:8.2f} {count:>6}")


if __name__ == "__main__":
    main()
