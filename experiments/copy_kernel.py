"""Aligned copies of misaligned operands: torch's ``copy_`` into the padded view, or a Triton tile copy?

``gemm()`` copies a misaligned operand into a buffer whose rows start on 128-byte boundaries
(``kernels.launch._aligned_copy``, ``config.needs_aligned_copy``) with ``dst.copy_(src)``, the destination a
strided view of the padded buffer.  torch's copy kernel for a non-contiguous destination walks the elements through
an offset calculator; a tile copy reads the source rows (as wide as their alignment allows) and writes whole padded rows in
16-byte vectors, the pad as zeros.  dev137 (194x7828x1362, both operands copied, 21 MB of B) ran 0.76x of torch.matmul.

For every random-dev shape that copies an operand, this times the sweep's three fastest configs with each copy beside
torch.matmul, as ``theodolite validate`` times a shape, and each copy alone (same harness).  Run on a GPU from the
repository root (writes ``$OUT/copy-kernel-<gpu>.json``)::

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/copy_kernel.py
"""

import math
import sys
from typing import Any

import triton
import triton.language as tl

PER_SHAPE = 3


@triton.jit
def pad_copy_kernel(
    src, dst, outer, inner, padded, src_b, src_r, dst_b, dst_r,
    VEC: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr,
):  # fmt: skip
    """One BLOCK_R x BLOCK_C tile of [batch, outer, inner] copied into rows of ``padded`` elements (zeros past
    ``inner``); ``VEC`` divides the source's strides, base and ``inner``, 64 the destination's."""
    pid_c = tl.program_id(0)
    pid_r = tl.program_id(1)
    bid = tl.program_id(2)
    src_r = (src_r // VEC) * VEC
    src_b = (src_b // VEC) * VEC
    inner = (inner // VEC) * VEC
    dst_r = (dst_r // 64) * 64
    dst_b = (dst_b // 64) * 64
    padded = (padded // 64) * 64
    r = pid_r * BLOCK_R + tl.arange(0, BLOCK_R)
    c = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    rows = r < outer
    s = src + tl.cast(bid, tl.int64) * src_b + r.to(tl.int64)[:, None] * src_r + c[None, :]
    x = tl.load(s, mask=rows[:, None] & (c[None, :] < inner), other=0.0)
    d = dst + tl.cast(bid, tl.int64) * dst_b + r.to(tl.int64)[:, None] * dst_r + c[None, :]
    tl.store(d, x, mask=rows[:, None] & (c[None, :] < padded))


class TileCopy:
    """Plan step standing in for a ``launch._AlignedCopy``: the same source view into the whole padded buffer."""

    def __init__(self, step: Any, block_r: int = 32, block_c: int = 128) -> None:
        src, dst = step.src, step.dst
        batch, outer, inner = src.shape
        padded = -(-inner // 64) * 64
        self.src, self.full = src, dst.as_strided((batch, outer, padded), dst.stride())
        elem = src.element_size()
        bits = src.data_ptr() // elem | src.stride(1) | (src.stride(0) if batch > 1 else 0) | inner
        self.vec = min(16 // elem, bits & -bits)
        self.args = (outer, inner, padded, src.stride(0), src.stride(1), self.full.stride(0), self.full.stride(1))
        self.grid = (triton.cdiv(padded, block_c), triton.cdiv(outer, block_r), batch)
        self.blocks = (block_r, block_c)

    def __call__(self) -> None:
        pad_copy_kernel[self.grid](self.src, self.full, *self.args, VEC=self.vec, BLOCK_R=self.blocks[0],
                                   BLOCK_C=self.blocks[1], num_warps=4)  # fmt: skip


def tile_copy_plans(sets: list[Any], key: str) -> list[Any]:
    """Each (A, B, out) set's plan of ``key`` with its aligned copies made by ``TileCopy``."""
    from theodolite.kernels.config import GemmConfig
    from theodolite.kernels.launch import _AlignedCopy, plan_gemm

    plans = [plan_gemm(x, y, GemmConfig.from_key(key), out=o) for x, y, o in sets]
    for plan in plans:
        plan.steps = [TileCopy(s) if isinstance(s, _AlignedCopy) else s for s in plan.steps]
    return plans


def shapes(gpu: str) -> list[tuple[str, int, int, int, str, list[str]]]:
    """(name, M, N, K, which operands are copied, the sweep's fastest configs) of the random-dev shapes with a copy."""
    from harness import fastest
    from theodolite.kernels.config import Problem, needs_aligned_copy

    from theodolite.results import load_results

    out = []
    for s in load_results(f"reports/results/validate-random-dev-{gpu}.json").shapes:
        copy_a, copy_b = needs_aligned_copy(Problem(s.M, s.N, s.K))
        if copy_a or copy_b:
            out.append((s.name, s.M, s.N, s.K, "A" * copy_a + "B" * copy_b, fastest(s.configs, PER_SHAPE)))
    return out


def main() -> None:
    import torch
    from harness import gpu_name, in_workers, time_as_validate, validate_inputs, warm, write_rows
    from theodolite.kernels.benchmark import Timer
    from theodolite.kernels.launch import _AlignedCopy

    gpu = gpu_name()
    todo = shapes(gpu)
    if len(sys.argv) > 1:
        todo = todo[: int(sys.argv[1])]
    tasks = sorted({(m, n, k, key, False) for _, m, n, k, _, keys in todo for key in keys})
    print("warmed", sum(in_workers(warm, tasks)), "shapes", len(todo), flush=True)
    timer = Timer()
    rows, ratios, copy_ratios = [], [], []
    for name, m, n, k, copied, keys in todo:
        inputs, sets, calls = validate_inputs(m, n, k, timer)
        ref = inputs.ref.float()
        for key in keys:
            from theodolite.kernels.config import GemmConfig
            from theodolite.kernels.launch import plan_gemm

            try:
                shipped = [plan_gemm(x, y, GemmConfig.from_key(key), out=o) for x, y, o in sets]
            except Exception as error:  # a config the shape cannot run
                print(name, key, "skipped:", error, flush=True)
                continue
            tiled = tile_copy_plans(sets, key)
            for way, plans in (("torch-copy", shipped), ("tile-copy", tiled)):
                out = sets[0][2]
                out.fill_(float("nan"))
                plans[0].run()
                err = ((out.float() - ref).abs().max() / ref.abs().max()).item()
                if err < 1e-2:
                    calls[f"{key}@{way}"] = [p.run for p in plans]
                else:
                    print(name, key, way, "wrong result", err, flush=True)
            if key == keys[0]:  # the copies alone, each way
                for way, plans, kind in (("torch-copy", shipped, _AlignedCopy), ("tile-copy", tiled, TileCopy)):
                    steps = [[s for s in p.steps if isinstance(s, kind)] for p in plans]
                    for i in range(len(steps[0])):
                        calls[f"copy{i}@{way}"] = [each[i] for each in steps]
        torch.cuda.synchronize()
        times = time_as_validate(timer, inputs, calls)
        for c, t in times.items():
            rows.append({"shape": name, "M": m, "N": n, "K": k, "copied": copied, "config": c, "us": t * 1e3})
        gemms = {c: t for c, t in times.items() if not c.startswith("copy")}
        best = {w: min((t for c, t in gemms.items() if c.endswith("@" + w)), default=math.inf)
                for w in ("torch-copy", "tile-copy")}  # fmt: skip
        copies = {w: sum(t for c, t in times.items() if c.startswith("copy") and c.endswith("@" + w))
                  for w in ("torch-copy", "tile-copy")}  # fmt: skip
        if math.isfinite(best["tile-copy"]) and math.isfinite(best["torch-copy"]):
            ratios.append(best["torch-copy"] / best["tile-copy"])
            copy_ratios.append(copies["torch-copy"] / copies["tile-copy"])
        print(f"{name} {m}x{n}x{k} copies {copied}: torch {times['torch'] * 1e3:.2f} us, torch copy best "
              f"{best['torch-copy'] * 1e3:.2f} (x{times['torch'] / best['torch-copy']:.3f}), tile copy best "
              f"{best['tile-copy'] * 1e3:.2f} (x{times['torch'] / best['tile-copy']:.3f}); copies alone "
              f"{copies['torch-copy'] * 1e3:.2f} / {copies['tile-copy'] * 1e3:.2f} us", flush=True)  # fmt: skip
    if ratios:
        geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
        geo_copy = math.exp(sum(map(math.log, copy_ratios)) / len(copy_ratios))
        print(f"best torch copy / best tile copy, geomean over {len(ratios)} shapes: {geo:.3f}; copies alone "
              f"{geo_copy:.3f}",
              flush=True)  # fmt: skip
    command = "PYTHONPATH=$PWD OUT=$OUT python3 experiments/copy_kernel.py"
    print("wrote", write_rows(f"copy-kernel-{gpu}", command, rows), file=sys.stderr)


if __name__ == "__main__":
    main()
