"""Host time per call of theodolite's entry points for a decoder's projections, on the CPU, the kernel launch stubbed.

What a host-bound eager model pays per ``F.linear`` replacement, without a GPU: the launch cache is made to build
its direct-launch entries as on a GPU (``fast_launch_enabled`` on, each ``_Launch`` given a no-op runner instead
of a compiled kernel), so every line of Python between the call and the driver's launch runs, and only the launch
itself (a C call, a few microseconds on a GPU host) and CUDA's allocator (the CPU's is used) differ.  Shapes: the
Llama-3-8B projections at M tokens (``theodolite.bench_linear.PROJECTIONS``), bf16, the bundled H100 profile's picks.

    PYTHONPATH=$PWD python3 experiments/linear_host_path.py [M] [--profile] [--compiled] [--grad]

Prints microseconds per call (median of rounds) per entry point; ``--profile`` adds a cProfile of ops.linear;
``--compiled`` adds the host time per projection inside an inductor-compiled graph (a chain of 8 patched 4096x4096
projections against a chain of 1: the graph call's own cost cancels), the operator's per-call cost there.
``--grad`` adds the training path: the forward with a gradient recorded (weight, or input and weight, requiring
grad) and the backward (``torch.autograd.grad`` of dX and dW, the forward's time subtracted; it includes the CPU
allocator's cost of dW, a fresh mmap per call above 32 MiB, printed as its own row), against F.linear's on 8x16x16
CPU tensors (torch's autograd record and engine with next to no arithmetic: a floor for the machinery);
with ``--profile``, the cProfile is of a forward and backward instead.
"""

from __future__ import annotations

import cProfile
import inspect
import os
import pstats
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

os.environ["TRITON_INTERPRET"] = "1"  # plan_gemm accepts CPU tensors; no kernel runs (the launches are stubbed)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from theodolite.kernels import launch  # noqa: E402

from theodolite import api, matmul, ops  # noqa: E402
from theodolite.bench_linear import PROJECTIONS  # noqa: E402
from theodolite.nn import Linear  # noqa: E402


def stub_launches() -> None:
    """Every _Launch binds its arguments as on a GPU and gets a no-op runner; the launch cache is on."""

    def compile_stub(self: Any) -> bool:
        signature = inspect.signature(self.kernel.fn)  # the interpreter's kernel: bind as JITFunction.signature does
        kwargs = {key: value for key, value in self.kwargs.items() if key in signature.parameters}
        bound = signature.bind(*self.args, **kwargs)
        bound.apply_defaults()
        self.ordered = list(bound.arguments.values())
        self.runner = lambda *args: None
        return True

    launch._Launch.compile = compile_stub  # type: ignore[method-assign]
    # the profile's SM count: split-K's legality (few tiles per SM) as on the H100, not the interpreter's 16 SMs
    sms = int(api.resolve(None).value("sm_count"))
    limits = launch.KernelLimits("sm_90", 227 * 1024, 65536, 255, 1024, 32, sms, 228 * 1024, 2048)
    launch.device_limits = lambda device: limits
    launch.fast_launch_enabled = lambda: True
    ops.unsupported = lambda x, w: None  # bf16 on the CPU: nothing runs, so let it through


def per_call_us(fn: Callable[[], Any], calls: int = 2000, rounds: int = 7) -> float:
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(samples)


def compiled_per_op_us(m: int, chain: int = 8) -> tuple[float, float]:
    """(host us per projection inside an inductor-compiled graph, host us of the graph call itself)."""
    from theodolite.nn import patch

    hidden = 4096
    loops = {}
    for n in (1, chain):
        model = torch.nn.Sequential(
            *(torch.nn.Linear(hidden, hidden, bias=False, dtype=torch.bfloat16) for _ in range(n))
        )
        patch(model)
        compiled = torch.compile(model, fullgraph=True, dynamic=False)
        x = torch.randn(m, hidden, dtype=torch.bfloat16)
        with torch.no_grad():
            compiled(x)
            loops[n] = per_call_us(lambda compiled=compiled, x=x: compiled(x), calls=1000)
    per_op = (loops[chain] - loops[1]) / (chain - 1)
    return per_op, loops[1] - per_op


def grad_rows(m: int) -> list[tuple[str, str, float]]:
    """(shape, entry, host us per call) of the forward with a gradient recorded and of the backward."""
    rows = []
    xs, ws = torch.randn(8, 16), torch.randn(16, 16)
    xsg, wsg, gs = xs.clone().requires_grad_(), ws.clone().requires_grad_(), torch.randn(8, 16)
    with torch.no_grad():
        rows.append(("8x16x16", "F.linear, no grad", per_call_us(lambda: F.linear(xs, ws))))
    rows.append(("8x16x16", "F.linear fwd, W requires grad", per_call_us(lambda: F.linear(xs, wsg))))
    fwd = per_call_us(lambda: F.linear(xsg, wsg))
    rows.append(("8x16x16", "F.linear fwd, X and W require grad", fwd))
    both = per_call_us(lambda: torch.autograd.grad(F.linear(xsg, wsg), (xsg, wsg), gs))
    rows.append(("8x16x16", "F.linear backward (dX, dW)", both - fwd))
    for name, k, n in (*PROJECTIONS, ("512x4096", 4096, 512)):  # the last: a 4 MiB dW, no mmap per call
        x, w = torch.randn(m, k, dtype=torch.bfloat16), torch.randn(n, k, dtype=torch.bfloat16)
        xg, wg, g = x.clone().requires_grad_(), w.clone().requires_grad_(), torch.randn(m, n, dtype=torch.bfloat16)
        entries: dict[str, Callable[[], Any]] = {
            "ops.linear fwd, W requires grad": lambda x=x, wg=wg: ops.linear(x, wg),
            "ops.linear fwd, X and W require grad": lambda xg=xg, wg=wg: ops.linear(xg, wg),
            "torch.ops.theodolite.linear fwd, X and W": lambda xg=xg, wg=wg: ops.linear_op(xg, wg, None),
            "ops.linear fwd+bwd (dX, dW)": lambda xg=xg, wg=wg, g=g: torch.autograd.grad(
                ops.linear(xg, wg), (xg, wg), g
            ),
            "ops.linear fwd+bwd (dW only)": lambda x=x, wg=wg, g=g: torch.autograd.grad(ops.linear(x, wg), (wg,), g),
        }
        timed = {}
        for entry, fn in entries.items():
            fn()
            timed[entry] = per_call_us(fn, calls=500)
        timed["ops.linear backward (dX, dW)"] = (
            timed.pop("ops.linear fwd+bwd (dX, dW)") - timed["ops.linear fwd, X and W require grad"]
        )
        timed["ops.linear backward (dW only)"] = (
            timed.pop("ops.linear fwd+bwd (dW only)") - timed["ops.linear fwd, W requires grad"]
        )
        timed["torch.empty of dX and dW (allocator floor)"] = per_call_us(
            lambda x=x, w=w: (torch.empty_like(x), torch.empty_like(w)), calls=500
        )
        rows.extend((name, entry, us) for entry, us in timed.items())
    return rows


def profile_grad(m: int) -> None:
    """cProfile of 5000 forwards and backwards of a 4096x4096 projection, input and weight requiring grad."""
    x = torch.randn(m, 4096, dtype=torch.bfloat16, requires_grad=True)
    w = torch.randn(4096, 4096, dtype=torch.bfloat16, requires_grad=True)
    g = torch.randn(m, 4096, dtype=torch.bfloat16)
    torch.autograd.grad(ops.linear(x, w), (x, w), g)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(5000):
        torch.autograd.grad(ops.linear(x, w), (x, w), g)
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(20)


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    m = int(args[0]) if args else 8
    stub_launches()
    profile = api.resolve(None)
    rows = []
    for name, k, n in PROJECTIONS:
        x = torch.randn(m, k, dtype=torch.bfloat16)
        w = torch.randn(n, k, dtype=torch.bfloat16)
        wg = w.clone().requires_grad_()
        lin = Linear(k, n, bias=False, dtype=torch.bfloat16)
        config = api.select(m, n, k, layout="nt", profile=profile).config
        sms = int(profile.value("sm_count"))
        entries: dict[str, Callable[[], Any]] = {
            "torch.empty (floor)": lambda x=x, n=n: torch.empty(x.shape[0], n, dtype=x.dtype),
            "kernels.gemm (launch cache)": lambda x=x, w=w, c=config, s=sms: launch.gemm(x, w.t(), c, num_sms=s),
            "theodolite.matmul(x, W.t())": lambda x=x, w=w: matmul(x, w.t()),
            "theodolite.ops.linear": lambda x=x, w=w: ops.linear(x, w),
            "torch.ops.theodolite.linear": lambda x=x, w=w: ops.linear_op(x, w, None),
            "theodolite.nn.Linear": lambda x=x, lin=lin: lin(x),
            "ops.linear, weight requires grad": lambda x=x, wg=wg: ops.linear(x, wg),
        }
        with torch.no_grad():
            for fn in list(entries.values())[:-1]:
                fn()
        entries["ops.linear, weight requires grad"]()
        for entry, fn in entries.items():
            if entry == "ops.linear, weight requires grad":
                us = per_call_us(fn, calls=500)
            else:
                with torch.no_grad():
                    us = per_call_us(fn)
            rows.append((name, config.key, entry, us))
    print(f"host us per call, CPU, kernel launch stubbed, M={m}, bf16, torch {torch.__version__}")
    for name, key, entry, us in rows:
        print(f"{name:>8} {key:<34} {entry:<34} {us:7.2f}")
    if "--compiled" in sys.argv:
        per_op, graph_call = compiled_per_op_us(m)
        print(f"inside an inductor-compiled graph: {per_op:.2f} us per projection, {graph_call:.2f} us per graph call")
    if "--grad" in sys.argv:
        print(f"with gradients: host us per call, CPU, kernel launch stubbed, M={m}, bf16 (F.linear: fp32, computed)")
        for name, entry, us in grad_rows(m):
            print(f"{name:>8} {entry:<42} {us:7.2f}")
        if "--profile" in sys.argv:
            profile_grad(m)
    elif "--profile" in sys.argv:
        x = torch.randn(m, 4096, dtype=torch.bfloat16)
        w = torch.randn(4096, 4096, dtype=torch.bfloat16)
        with torch.no_grad():
            ops.linear(x, w)
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(20000):
                ops.linear(x, w)
            prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(12)


if __name__ == "__main__":
    main()
