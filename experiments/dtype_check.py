"""fp8, fp16 and tf32 through theodolite.matmul against torch on a few llm.csv shapes (one GPU, ~2 minutes).

Correctness: fp8 e4m3/e5m2 in layouts nt (B = w.t() of an [N, K] weight) and nn, with per-tensor scales, against
torch._scaled_mm and against the fp32 matmul of the dequantized inputs (e5m2: torch refuses e5m2 x e5m2, so its
baseline is the mixed e5m2 x e4m3 call, whose error is its own); fp16 and tf32 against torch.matmul.  Times:
CUDA events, median of 20 calls after a warm-up, side by side.  Writes $OUT/dtype_check.json, prints a table last.

    PYTHONPATH=$PWD python3 experiments/dtype_check.py
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import warnings
from pathlib import Path

import torch
from theodolite.kernels.benchmark import scaled_mm_operand
from theodolite.kernels.shapes import load_suite

import theodolite

SHAPES = ("llama3-8b.qkv", "llama3-70b.gate_up", "llama3-8b.down")


def timed(fn, reps: int = 20) -> float:
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    return float((out.float() - ref.float()).abs().max() / ref.float().abs().max().clamp_min(1e-30))


def main() -> int:
    if not torch.cuda.is_available():
        print("needs a CUDA GPU")
        return 1
    rows = []
    picked = [s for s in load_suite("llm") if s[0] in SHAPES and s[1] in (16, 4096)] or load_suite("llm")[:6]
    gen = torch.Generator(device="cuda").manual_seed(0)
    for name, m, n, k in picked:
        for dtype in ("fp8e4m3", "fp8e5m2", "fp16", "tf32"):
            layouts = ("nt", "nn") if dtype.startswith("fp8") else ("nt",)
            for layout in layouts:
                row = {"shape": f"{name} {m}x{n}x{k}", "dtype": dtype, "layout": layout}
                try:
                    x = torch.randn(m, k, device="cuda", generator=gen) / k**0.25
                    w = torch.randn(n, k, device="cuda", generator=gen) / k**0.25  # nn.Linear's [N, K]
                    with warnings.catch_warnings(record=True) as caught:
                        warnings.simplefilter("always")
                        if dtype.startswith("fp8"):
                            fp8 = torch.float8_e4m3fn if dtype == "fp8e4m3" else torch.float8_e5m2
                            a, wq = x.to(fp8), w.to(fp8)
                            b = wq.t() if layout == "nt" else wq.t().contiguous()
                            sa = torch.tensor(0.5, device="cuda")
                            sb = torch.tensor(2.0, device="cuda")
                            ours = lambda a=a, b=b, sa=sa, sb=sb: theodolite.matmul(a, b, scale_a=sa, scale_b=sb)  # noqa: E731
                            wt = scaled_mm_operand(a, wq.t())  # e5m2: the mixed e5m2 x e4m3 call (same bytes)
                            base = lambda a=a, wt=wt, sa=sa, sb=sb: torch._scaled_mm(
                                a, wt, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16
                            )  # noqa: E731
                            exact = (a.float() @ wq.float().t()) * 1.0  # times sa * sb = 1
                        else:
                            dt = torch.float16 if dtype == "fp16" else torch.float32
                            torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
                            a, wt = x.to(dt), w.to(dt)
                            b = wt.t()
                            ours = lambda a=a, b=b: theodolite.matmul(a, b)  # noqa: E731
                            base = lambda a=a, b=b: torch.matmul(a, b)  # noqa: E731
                            exact = x.double() @ w.double().t()
                        out = ours()
                        ref = base()
                        row.update(
                            out_dtype=str(out.dtype).replace("torch.", ""),
                            err_vs_exact=rel_error(out, exact),
                            err_vs_torch=rel_error(out, ref),
                            torch_err_vs_exact=rel_error(ref, exact),
                            ours_ms=timed(ours),
                            torch_ms=timed(base),
                            fallbacks=[str(w.message)[:160] for w in caught],
                        )
                    row["speed"] = row["torch_ms"] / row["ours_ms"]
                    limit = 0.1 if dtype.startswith("fp8") else 2e-2
                    row["ok"] = row["err_vs_exact"] <= max(limit, 2 * row["torch_err_vs_exact"])
                except Exception as error:  # report every failure, keep going
                    row.update(ok=False, error=f"{type(error).__name__}: {str(error)[:300]}")
                rows.append(row)
                print(json.dumps(row), flush=True)
    out_dir = Path(os.environ.get("OUT", "."))
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "dtype_check.json").write_text(json.dumps(rows, indent=1))
    print(f"\n{'shape':<34} {'dtype':<8} {'lay':<3} {'ok':<3} {'err':>8} {'ours ms':>9} {'torch ms':>9} {'x':>6}")
    for r in rows:
        if "error" in r:
            print(f"{r['shape']:<34} {r['dtype']:<8} {r['layout']:<3} NO  {r['error'][:80]}")
            continue
        print(
            f"{r['shape']:<34} {r['dtype']:<8} {r['layout']:<3} {'yes' if r['ok'] else 'NO':<3} "
            f"{r['err_vs_exact']:>8.2e} {r['ours_ms']:>9.4f} {r['torch_ms']:>9.4f} {r['speed']:>6.2f}"
            + (" fallback" if r["fallbacks"] else "")
        )
    return 0 if all(r["ok"] for r in rows) else 2


if __name__ == "__main__":
    sys.exit(main())
