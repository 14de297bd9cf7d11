"""Host time per call of a linear with gradients on a CUDA GPU: F.linear against theodolite.ops.linear.

The training-side counterpart of ``python -m theodolite bench-linear``'s host rows: per Llama-3-8B projection at M
tokens (bf16, the bundled profile's picks), the host microseconds of the forward without a gradient, with the weight
(or input and weight) requiring grad, and of a forward and backward (``torch.autograd.grad`` of dX and dW, or dW
alone), the GPU kept busy so no call waits for it (best of five loops).  Checks the gradients against F.linear's,
then profiles ``ops.linear``'s forward and backward: cProfile's top functions by own time and torch.profiler's CPU
operators (a Chrome trace of a few calls is written beside the JSON).

    PYTHONPATH=$PWD python3 experiments/grad_host_gpu.py [M]

Writes ``$OUT/grad-host-gpu.json`` (or ./grad-host-gpu.json) and ``grad-host-trace.json``; prints the table last.
Runs in about a minute on an H100 (most of it compiling the forward's and backward's kernels once).
"""

from __future__ import annotations

import cProfile
import io
import json
import os
import pstats
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from theodolite import ops
from theodolite.bench_linear import PROJECTIONS, _busy, _sync

CALLS = 200  # host time of 200 calls stays well inside the GPU's 0.1 s busy wait and the launch queue


def host_us(fn: Callable[[], Any], loops: int = 5) -> float:
    """Best host microseconds per call over ``loops`` loops of CALLS calls, the GPU busy before each loop."""
    best = float("inf")
    for _ in range(loops):
        _busy()
        t0 = time.perf_counter()
        for _ in range(CALLS):
            fn()
        best = min(best, (time.perf_counter() - t0) / CALLS * 1e6)
        _sync()
    return best


def entries(x: Tensor, w: Tensor, g: Tensor) -> dict[str, Callable[[], Any]]:
    """The timed calls of one projection: (F.linear, ops.linear) for each case."""
    xg, wg = x.detach().requires_grad_(), w.detach().requires_grad_()
    out: dict[str, Callable[[], Any]] = {}
    for name, fn in (("F.linear", F.linear), ("ops.linear", ops.linear)):
        out[f"{name} fwd, W requires grad"] = lambda fn=fn: fn(x, wg)
        out[f"{name} fwd, X and W require grad"] = lambda fn=fn: fn(xg, wg)
        out[f"{name} fwd+bwd (dX, dW)"] = lambda fn=fn: torch.autograd.grad(fn(xg, wg), (xg, wg), g)
        out[f"{name} fwd+bwd (dW)"] = lambda fn=fn: torch.autograd.grad(fn(x, wg), (wg,), g)
    return out


def check_grads(x: Tensor, w: Tensor, g: Tensor) -> float:
    """Largest relative difference of ops.linear's dX and dW from F.linear's (bf16: a few 1e-3 expected)."""
    xg, wg = x.detach().requires_grad_(), w.detach().requires_grad_()
    got = torch.autograd.grad(ops.linear(xg, wg), (xg, wg), g)
    want = torch.autograd.grad(F.linear(xg, wg), (xg, wg), g)
    return max(((a.float() - b.float()).abs().max() / b.float().abs().max().clamp_min(1e-6)).item()
               for a, b in zip(got, want, strict=True))  # fmt: skip


def profiles(x: Tensor, w: Tensor, g: Tensor, trace: Path) -> dict[str, Any]:
    """cProfile (top 15 by own time, per call) and torch.profiler's CPU operators of ops.linear forward+backward."""
    xg, wg = x.detach().requires_grad_(), w.detach().requires_grad_()

    def step() -> Any:
        return torch.autograd.grad(ops.linear(xg, wg), (xg, wg), g)

    step()
    _sync()
    _busy()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(CALLS):
        step()
    prof.disable()
    _sync()
    rows = []
    stats = pstats.Stats(prof, stream=io.StringIO()).stats  # type: ignore[attr-defined]
    for (filename, line, function), (_, ncalls, tottime, cumtime, _) in stats.items():
        rows.append({"function": f"{filename.rsplit('/', 2)[-1]}:{line}({function})", "calls": ncalls,
                     "own_us_per_call": tottime / CALLS * 1e6, "cum_us_per_call": cumtime / CALLS * 1e6})  # fmt: skip
    rows.sort(key=lambda r: -r["own_us_per_call"])
    from torch.profiler import ProfilerActivity, profile

    _busy()
    with profile(activities=[ProfilerActivity.CPU]) as tprof:
        for _ in range(20):
            step()
    _sync()
    tprof.export_chrome_trace(str(trace))
    ops_rows = [{"name": e.key, "calls": e.count, "self_cpu_us_per_step": e.self_cpu_time_total / 20}
                for e in sorted(tprof.key_averages(), key=lambda e: -e.self_cpu_time_total)[:15]]  # fmt: skip
    return {"cprofile_fwd_bwd": rows[:15], "torch_profiler_cpu_fwd_bwd": ops_rows}


def main() -> None:
    if not torch.cuda.is_available():
        sys.exit("grad_host_gpu.py needs a CUDA GPU (experiments/linear_host_path.py --grad is its CPU counterpart)")
    m = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    out_dir = Path(os.environ.get("OUT", "."))
    out_dir.mkdir(parents=True, exist_ok=True)
    dev, dtype = torch.device("cuda"), torch.bfloat16
    result: dict[str, Any] = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "m": m, "rows": []}
    for name, k, n in PROJECTIONS:
        x = torch.randn(m, k, device=dev, dtype=dtype)
        w = torch.randn(n, k, device=dev, dtype=dtype) * k**-0.5
        g = torch.randn(m, n, device=dev, dtype=dtype)
        err = check_grads(x, w, g)
        timed = {}
        with torch.no_grad():
            for fn_name, linear in (("F.linear", F.linear), ("ops.linear", ops.linear)):
                linear(x, w)
                timed[f"{fn_name} no grad"] = host_us(lambda f=linear, x=x, w=w: f(x, w))
        for entry, call in entries(x, w, g).items():
            call()
            timed[entry] = host_us(call)
        result["rows"].append({"projection": name, "k": k, "n": n, "grad_rel_err": err, "host_us": timed})
    x = torch.randn(m, 4096, device=dev, dtype=dtype)
    w = torch.randn(4096, 4096, device=dev, dtype=dtype) * 4096**-0.5
    result["profile_4096x4096"] = profiles(x, w, torch.randn(m, 4096, device=dev, dtype=dtype),
                                           out_dir / "grad-host-trace.json")  # fmt: skip
    (out_dir / "grad-host-gpu.json").write_text(json.dumps(result, indent=1))
    prof = result["profile_4096x4096"]["cprofile_fwd_bwd"]
    print("cProfile of ops.linear forward+backward, 4096x4096, top own time (us per step):")
    for r in prof[:8]:
        print(f"  {r['own_us_per_call']:7.2f} {r['cum_us_per_call']:7.2f}  {r['function']}")
    print(f"host us per call, {result['gpu']}, torch {torch.__version__}, M={m}, bf16 (F.linear / ops.linear)")
    cases = ["no grad", "fwd, W requires grad", "fwd, X and W require grad", "fwd+bwd (dX, dW)", "fwd+bwd (dW)"]
    print(f"{'projection':>10} {'grad err':>9} " + " ".join(f"{c:>27}" for c in cases))
    for row in result["rows"]:
        t = row["host_us"]
        cells = " ".join(f"{t['F.linear ' + c]:12.1f} /{t['ops.linear ' + c]:12.1f}" for c in cases)
        print(f"{row['projection']:>10} {row['grad_rel_err']:9.1e} {cells}")


if __name__ == "__main__":
    main()
