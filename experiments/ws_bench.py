"""Hopper automatic warp specialization (Triton 3.6, ``tl.range(..., warp_specialize=True)``) tried on our TMA kernel.

The variant is derived from ``kernels/tma.py`` at run time (text substitution into a temporary module):
``WS_OUTER`` warp-specializes the tile loop, ``WS_INNER`` the K loop, ``DESC_STORE`` replaces the pointer
epilogue by a tensor-descriptor store (plain cast, no alpha/beta/bias).  Large bf16 shapes, L2 flushed
before each run, candidates (torch.matmul, our best configs, the WS variants) interleaved round by round.
Run on a GPU from the repository root (writes ``$OUT/ws-bench.json``)::

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/ws_bench.py [MxNxK,...]
"""

import importlib.util
import json
import os
import sys
import tempfile
import time

import torch
import triton
from theodolite.kernels import tma
from theodolite.kernels.benchmark import make_inputs
from theodolite.kernels.config import GemmConfig
from theodolite.kernels.launch import _Launch, plan_gemm


def _ws_module():
    with open(tma.__file__) as stream:
        src = stream.read()
    src = src.replace(
        "BLOCK_N1: tl.constexpr = 0,\n):",
        "BLOCK_N1: tl.constexpr = 0, WS_OUTER: tl.constexpr = False, WS_INNER: tl.constexpr = False,"
        " DESC_STORE: tl.constexpr = False,\n):",
    )
    src = src.replace(
        "for tile in tl.range(pid, num_tiles, programs, flatten=FLATTEN):",
        "for tile in tl.range(pid, num_tiles, programs, flatten=FLATTEN, warp_specialize=WS_OUTER):",
    )
    src = src.replace("for kk in range(k_tiles):", "for kk in tl.range(k_tiles, warp_specialize=WS_INNER):")
    src = src.replace(
        "        epilogue_at(\n            acc, out_ptr",
        "        if DESC_STORE:\n            out_desc.store([off_m, off_n], acc.to(out_ptr.dtype.element_ty))\n"
        "        else:\n          epilogue_at(\n            acc, out_ptr",
    )
    src = src.replace(
        "    pid = tl.program_id(0)",
        "    if DESC_STORE:\n        out_desc = tl.make_tensor_descriptor("
        "out_ptr, [M, N], [stride_om, 1], [BLOCK_M, BLOCK_N])\n    pid = tl.program_id(0)",
    )
    src = src.replace("def tma_kernel(", "def tma_ws_kernel(")
    assert src.count("WS_OUTER") == 2 and src.count("DESC_STORE") == 3, (
        "kernels/tma.py changed: update the substitutions"
    )
    folder = tempfile.mkdtemp()
    path = os.path.join(folder, "tma_ws.py")  # triton.jit needs a real source file
    with open(path, "w") as stream:
        stream.write(src)
    spec = importlib.util.spec_from_file_location("tma_ws", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


mod = _ws_module()
SMS = torch.cuda.get_device_properties(0).multi_processor_count


def make(a, b, key, ws=None, desc=False):
    config = GemmConfig.from_key(key)
    warps = config.num_warps
    plan = plan_gemm(a, b, GemmConfig.from_key(key.replace("/w4/", "/w8/")) if ws else config)
    if ws:
        for step in plan.steps:
            if isinstance(step, _Launch) and step.kernel is tma.tma_kernel:
                step.kernel = mod.tma_ws_kernel
                step.kwargs = {
                    **step.kwargs,
                    "WS_OUTER": ws.startswith("outer"),
                    "WS_INNER": ws.startswith("inner"),
                    "DESC_STORE": ws.endswith("desc"),
                    "num_warps": warps,
                }
                step.grid = (min(step.grid[0], SMS),)
    return plan


SHAPES = [
    (int(x) for x in s.split("x"))
    for s in (
        sys.argv[1].split(",")
        if len(sys.argv) > 1
        else [
            "4096x4096x4096",
            "8192x8192x8192",
            "16384x10240x8192",
            "2048x57344x8192",
            "4096x14336x4096",
            "2048x8192x8192",
            "512x28672x4096",
            "512x10240x8192",
            "2048x4096x4096",
            "512x4096x4096",
            "1024x1024x1024",
            "4096x128256x4096",
            "16384x8192x28672",
        ]
    )
]
CANDS = [
    ("tma/128x256x64/g8/w8/s3/k1/f", None),
    ("tma/128x256x64/g8/w8/s4/k1/f", None),
    ("persistent/128x256x64/g8/w8/s3/k1/f", None),
    ("tma/128x256x64/g8/w4/s3/k1", "outer"),
    ("tma/128x256x64/g8/w4/s3/k1", "inner"),
    ("tma/128x256x64/g8/w4/s3/k1", "outer-desc"),
    ("tma/128x256x64/g8/w4/s3/k1", "inner-desc"),
    ("tma/128x256x64/g8/w8/s3/k1", "outer-desc"),
    ("tma/128x128x64/g8/w4/s4/k1", "outer"),
    ("tma/128x128x64/g8/w4/s4/k1", "inner"),
    ("tma/128x128x64/g8/w4/s4/k1", "outer-desc"),
    ("tma/128x128x128/g8/w4/s3/k1", "outer-desc"),
    ("tma/128x128x64/g8/w8/s4/k1", "outer-desc"),
]
driver = triton.runtime.driver.active
cache = driver.get_empty_cache_for_benchmark()
rows = []
for m, n, k in SHAPES:
    a, b = make_inputs(m, n, k, "bf16", "nn", torch.device("cuda"), seed=m + n + k)
    ref = torch.matmul(a, b)
    tout = torch.empty_like(ref)
    fns, names, errs = [lambda a=a, b=b, tout=tout: torch.matmul(a, b, out=tout)], ["torch"], {}
    for key, ws in CANDS:
        name = key + ("+ws-" + ws if ws else "")
        try:
            plan = make(a, b, key, ws)
            plan.out.fill_(float("nan"))
            plan.run()
            torch.cuda.synchronize()
            err = ((plan.out.float() - ref.float()).abs().max() / ref.float().abs().max()).item()
            if not err < 1e-2:
                errs[name] = f"wrong {err}"
                continue
            fns.append(plan.run)
            names.append(name)
        except Exception as error:
            errs[name] = f"{type(error).__name__}: {str(error)[:160]}"
    flops = 2.0 * m * n * k
    est = []
    for f in fns:
        f()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        f()
        torch.cuda.synchronize()
        est.append(time.perf_counter() - t0)
    rounds = int(min(25, max(5, 0.4 / max(sum(est), 1e-4))))
    samples: dict[str, list[float]] = {nm: [] for nm in names}
    for r in range(rounds):
        order = list(range(len(fns)))
        order = order[r % len(order) :] + order[: r % len(order)]
        if r % 2:
            order.reverse()
        for i in order:
            driver.clear_cache(cache)
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            fns[i]()
            end.record()
            torch.cuda.synchronize()
            samples[names[i]].append(begin.elapsed_time(end))
    med = {nm: sorted(v)[len(v) // 2] for nm, v in samples.items()}
    rows.append({"shape": f"{m}x{n}x{k}", "ms": med, "errors": errs, "rounds": rounds})
    t = med["torch"]
    line = f"{m}x{n}x{k}: torch {flops / t / 1e9:.0f} TF | " + " | ".join(
        f"{nm.replace('/g8', '').replace('/k1', '')} {t / ms:.3f}" for nm, ms in med.items() if nm != "torch"
    )
    print(line, flush=True)
    for nm, message in errs.items():
        print("   ", nm, message)
    del a, b, ref, tout
    torch.cuda.empty_cache()
with open(os.path.join(os.environ.get("OUT", "."), "ws-bench.json"), "w") as stream:
    json.dump(
        {
            "device": torch.cuda.get_device_name(),
            "rows": rows,
            "triton": triton.__version__,
            "torch": torch.__version__,
            "command": "PYTHONPATH=$PWD OUT=$OUT python3 experiments/ws_bench.py "
            + ",".join(f"{r['shape']}" for r in rows),
            "timing": "L2 flushed, candidates interleaved per round, median",
        },
        stream,
        indent=1,
    )
