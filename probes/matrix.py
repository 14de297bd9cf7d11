"""Matrix units: dense throughput per dtype from a kernel whose operands stay on chip.

Each program loads one A tile and one B tile once, then runs ITERS dependent ``tl.dot``
accumulations on them: no memory traffic in the loop, so the rate is the matrix units' (and
the issue path's).  A few tile shapes are tried and the best is kept.  Also: the latency of a
dependent dot of the smallest wgmma tile (differential timing, converted with the max clock),
the fp32 FMA rate, and the wave staircase (time against programs launched) whose step width
cross-checks the SM census.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

import numpy as np
import triton
import triton.language as tl
from theodolite.probes import analysis
from theodolite.probes.common import ProbeContext, ProbeResult, clock64, cuda_time, globaltimer

from theodolite.profile.schema import Curve, Measurement

METHOD = "matrix"


@triton.jit(do_not_specialize=["ITERS"])
def mma_kernel(
    a_ptr,
    b_ptr,
    out_ptr,
    time_ptr,
    ITERS,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    PRECISION: tl.constexpr,
    TIMED: tl.constexpr,
):
    pid = tl.program_id(0)
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a = tl.load(a_ptr + rm[:, None] * BK + rk[None, :])
    bt = tl.load(b_ptr + rn[:, None] * BK + rk[None, :])
    b = tl.trans(bt)
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    z = tl.zeros([1], dtype=tl.int64)
    if TIMED:
        c0 = clock64(z)
        g0 = globaltimer(z)
    for _ in range(ITERS):
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
    total = tl.sum(tl.sum(acc, axis=1), axis=0)
    tl.store(out_ptr + pid, total)
    if TIMED:
        dep = z + (total > 1e38).to(tl.int64)
        c1 = clock64(dep)
        g1 = globaltimer(dep)
        if pid == 0:
            offs = tl.arange(0, 1)
            tl.store(time_ptr + offs, c1 - c0)
            tl.store(time_ptr + 1 + offs, g1 - g0)
            tl.store(time_ptr + 2 + offs, g0)


@triton.jit(do_not_specialize=["ITERS"])
def fma_kernel(x_ptr, out_ptr, time_ptr, ITERS, BLOCK: tl.constexpr, TIMED: tl.constexpr = False):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    a = x * 0.25 + 0.5  # |a| < 1: the chain stays finite
    b = x * 0.25
    y = x
    z = tl.zeros([1], dtype=tl.int64)
    if TIMED:
        c0 = clock64(z)
        g0 = globaltimer(z)
    for _ in range(ITERS):
        y = tl.fma(y, a, b)
    tl.store(out_ptr + pid * BLOCK + offs, y)
    if TIMED:
        dep = z + (tl.sum(y, axis=0) > 1e38).to(tl.int64)
        c1 = clock64(dep)
        g1 = globaltimer(dep)
        if pid == 0:
            one = tl.arange(0, 1)
            tl.store(time_ptr + one, c1 - c0)
            tl.store(time_ptr + 1 + one, g1 - g0)


# dtype -> (torch dtype name, precision, tile candidates (BM, BN, BK, warps), latency tile)
DTYPES: dict[str, tuple[str, str, list[tuple[int, int, int, int]], tuple[int, int, int]]] = {
    "fp16": ("float16", "ieee", [(128, 256, 64, 8), (128, 128, 64, 4), (128, 256, 128, 8)], (64, 64, 16)),
    "bf16": ("bfloat16", "ieee", [(128, 256, 64, 8), (128, 128, 64, 4), (128, 256, 128, 8)], (64, 64, 16)),
    "tf32": ("float32", "tf32", [(128, 256, 32, 8), (128, 128, 32, 4), (128, 256, 64, 8)], (64, 64, 16)),
    "fp8e4m3": ("float8_e4m3fn", "ieee", [(128, 256, 128, 8), (128, 128, 128, 4)], (64, 64, 32)),
    "fp8e5m2": ("float8_e5m2", "ieee", [(128, 256, 128, 8), (128, 128, 128, 4)], (64, 64, 32)),
}


# Repeatability (issue 3: two calibrations within 3%).  A few-millisecond sample right after an
# idle gap (a compile, a tile switch) runs at whatever clock the power controller allows at that
# moment: under matrix load the card drifts from max boost down to its power-limited clock over
# about a second, so short samples disagreed run to run (fp16 3.7%, fp32 FMA 6.2% on the H100).
# Every throughput is therefore measured in the steady state: the chosen kernel first runs
# WARM_S seconds back to back, then each sample lasts SAMPLE_S seconds; the clock of every sample
# is logged, and tiles are compared by FLOP per cycle (clock-independent), not by FLOP/s.
WARM_S = 1.5
SAMPLE_S = 50e-3
# Under the power limit the clock oscillates by several percent over ~100 ms (seen on the H100:
# 1.37-1.71 GHz): the throughput is the median of at least MATRIX_REPEATS samples (0.5 s).
MATRIX_REPEATS = 10
# --quick used 5 samples of 8 ms (40 ms, less than one period of that oscillation) after 0.4 s: each sample steady
# (CV 0.1%) but the window caught one phase, so the same H200 read mma_throughput_fp16 766-819 TFLOP/s run to run
# (1.43-1.53 GHz at the bundled profile's FLOP per cycle).  Quick now samples 16 x 25 ms = 0.4 s (four periods, most of
# the full run's 0.5 s) after 0.6 s (the H100's clock_ramp_s reached 0.8 s): about 3 s more over the five dtypes.
WARM_S_QUICK = 0.6
SAMPLE_S_QUICK = 25e-3
MATRIX_REPEATS_QUICK = 16
# Tiles differ by 1-3% FLOP per cycle, about the noise of a short score: the first (default) tile
# is replaced only by one that does TILE_MARGIN more per cycle, so runs pick the same tile.
TILE_MARGIN = 0.05


def warm_up(launch: Callable[[], object], seconds: float) -> float:
    """Launch ``launch`` back to back for about ``seconds`` (wall, synchronized in batches); the
    seconds it really ran come back."""
    import torch

    torch.cuda.synchronize()
    begin = time.perf_counter()
    batch = 1
    while time.perf_counter() - begin < seconds:
        for _ in range(batch):
            launch()
        torch.cuda.synchronize()
        batch = min(batch * 2, 64)
    return time.perf_counter() - begin


def _operands(dtype: str, bm: int, bn: int, bk: int, device: str):
    import torch

    torch_dtype = getattr(torch, DTYPES[dtype][0])
    a = (torch.randn(bm, bk, device=device) * 0.01).to(torch_dtype)
    b = (torch.randn(bn, bk, device=device) * 0.01).to(torch_dtype)
    return a, b


def supported(dtype: str, capability: tuple[int, int]) -> str | None:
    """None when the dtype's dot runs here, else why not."""
    if dtype.startswith("fp8") and capability < (8, 9):
        return f"fp8 matrix instructions need sm_89 or newer (this GPU is sm_{capability[0]}{capability[1]})"
    if dtype in ("bf16", "tf32") and capability < (8, 0):
        return f"{dtype} matrix instructions need sm_80 or newer"
    return None


def throughput(ctx: ProbeContext, dtype: str, tile: tuple[int, int, int, int], target_s: float = 4e-3):
    """(sample function returning FLOP/s, settings, clocks, warm launch) of one tile shape; a sample
    is two launches of about ``target_s`` each.

    Every launch also logs program 0's clock (``%clock64`` over ``%globaltimer``); each sample
    appends it to ``clocks`` so the FLOP per cycle of the run can be stored beside the FLOP/s.
    """
    import torch

    bm, bn, bk, warps = tile
    device = f"cuda:{ctx.device}"
    a, b = _operands(dtype, bm, bn, bk, device)
    grid = ctx.sm_count * 12  # divisible by 1..4 programs per SM: whole waves
    out = torch.empty(grid, dtype=torch.float32, device=device)
    times = torch.zeros(4, dtype=torch.int64, device=device)
    precision = DTYPES[dtype][1]
    clocks: list[float] = []

    def launch(iters: int) -> None:
        mma_kernel[(grid,)](
            a,
            b,
            out,
            times,
            iters,
            BM=bm,
            BN=bn,
            BK=bk,
            PRECISION=precision,
            TIMED=True,
            num_warps=warps,
            num_stages=1,
        )

    probe_iters = 64
    seconds = cuda_time(lambda: launch(probe_iters), launches=2)
    iters = max(16, int(probe_iters * target_s / max(seconds, 1e-7)))
    flops = 2.0 * bm * bn * bk * iters * grid

    def sample() -> float:
        rate = flops / cuda_time(lambda: launch(iters), launches=2, warmup=0)
        cycles, nanoseconds = (float(v) for v in times[:2].cpu().tolist())
        if cycles > 0 and nanoseconds > 0:
            clocks.append(cycles / nanoseconds * 1e9)
        return rate

    settings = {"tile": f"{bm}x{bn}x{bk}", "num_warps": warps, "programs": grid, "iters": iters}
    return sample, settings, clocks, lambda: launch(iters)


def per_cycle(rates: list[float], clocks: list[float]) -> float:
    """Best FLOP per cycle of samples whose clocks were logged (the rate when none was)."""
    pairs = [r / c for r, c in zip(rates, clocks, strict=False) if c > 0]
    return max(pairs) if pairs else max(rates)


def dot_latency(ctx: ProbeContext, dtype: str) -> float:
    """Cycles of one dependent dot of the smallest wgmma tile (one program; differential timing).

    Counted in SM cycles by the program's own ``%clock64`` (the difference of a 6000- and a
    2000-dot chain), so the clock state left by the throughput runs does not enter; the event
    time x ``clock_max_hz`` is the fallback when no cycles were logged."""
    import torch

    bm, bn, bk = DTYPES[dtype][3]
    device = f"cuda:{ctx.device}"
    a, b = _operands(dtype, bm, bn, bk, device)
    out = torch.empty(1, dtype=torch.float32, device=device)
    times = torch.zeros(4, dtype=torch.int64, device=device)

    def run_iters(iters: int) -> tuple[float, float]:
        seconds = cuda_time(
            lambda: mma_kernel[(1,)](
                a,
                b,
                out,
                times,
                iters,
                BM=bm,
                BN=bn,
                BK=bk,
                PRECISION=DTYPES[dtype][1],
                TIMED=True,
                num_warps=4,
                num_stages=1,
            ),
            launches=3,
        )
        return seconds, float(times[0].item())

    low, high = 2000, 6000
    (s_low, c_low), (s_high, c_high) = run_iters(low), run_iters(high)
    if c_low > 0 and c_high > c_low:
        return (c_high - c_low) / (high - low)
    return (s_high - s_low) / (high - low) * ctx.clock_max_hz


def staircase(ctx: ProbeContext) -> tuple[np.ndarray, np.ndarray, dict]:
    """Time against programs launched for a fixed-work bf16 program (1 per SM by its registers)."""
    import torch

    bm, bn, bk, warps = 128, 256, 64, 8
    device = f"cuda:{ctx.device}"
    a, b = _operands("bf16", bm, bn, bk, device)
    top = int(2.5 * ctx.sm_count)
    out = torch.empty(top, dtype=torch.float32, device=device)
    times = torch.zeros(3, dtype=torch.int64, device=device)
    step = 1 if not ctx.quick else 2
    programs = np.arange(1, top + 1, step)
    kernel = None

    def launch(p: int, iters: int):
        return mma_kernel[(int(p),)](
            a,
            b,
            out,
            times,
            iters,
            BM=bm,
            BN=bn,
            BK=bk,
            PRECISION="ieee",
            TIMED=False,
            num_warps=warps,
            num_stages=1,
        )

    kernel = launch(1, 8)
    iters = 64
    samples = np.array([cuda_time(lambda p=p: launch(p, iters), launches=2) for p in programs])
    info = {"n_regs": int(getattr(kernel, "n_regs", 0)), "shared": int(getattr(kernel.metadata, "shared", 0))}
    return programs, samples, info


def run(ctx: ProbeContext) -> ProbeResult:
    import torch

    result = ProbeResult()
    best_by_dtype: dict[str, float] = {}
    for dtype in DTYPES:
        reason = supported(dtype, ctx.capability)
        if reason:
            result.unsupported[f"mma_throughput_{dtype}"] = reason
            if dtype == "fp8e4m3":
                result.unsupported["mma_latency_fp8e4m3"] = reason
            continue
        tiles = DTYPES[dtype][2][:1] if ctx.quick else DTYPES[dtype][2]
        sample_s = SAMPLE_S_QUICK if ctx.quick else SAMPLE_S
        best: tuple[float, object, dict, list[float], Callable[[], None]] | None = None
        tried: dict[str, object] = {}
        for tile in tiles:
            try:
                sample, settings, clocks, warm_launch = throughput(ctx, dtype, tile, target_s=sample_s / 2)
                clocks.clear()
                rates = [sample() for _ in range(2)]
                score = per_cycle(rates, clocks)
            except Exception as error:  # a tile that does not compile here is skipped, not fatal
                tried[f"{tile}"] = f"failed: {type(error).__name__}: {str(error)[:120]}"
                continue
            tried[settings["tile"] + f"/w{tile[3]}"] = max(rates)
            tried[settings["tile"] + f"/w{tile[3]}/flop_per_cycle_per_sm"] = round(score / ctx.sm_count, 1)
            if best is None or score > best[0] * (1.0 + TILE_MARGIN):
                best = (score, sample, settings, clocks, warm_launch)
        if best is None:
            result.unsupported[f"mma_throughput_{dtype}"] = f"no tile compiled: {tried}"
            continue
        _, sample, settings, clocks, warm_launch = best
        warmed = warm_up(warm_launch, WARM_S_QUICK if ctx.quick else WARM_S)
        settings = {
            **settings,
            "tiles_tried": str(tried),
            "tile_choice": f"first tile unless another does {TILE_MARGIN:.0%} more FLOP per cycle",
            "warm_s": round(warmed, 3),
            "sample_s": sample_s,
        }
        clocks.clear()
        measurement = analysis.measure_with_retries(
            sample,
            f"mma_throughput_{dtype}",
            "FLOP/s",
            "matrix.onchip_dot",
            repeats=max(ctx.repeats, MATRIX_REPEATS_QUICK if ctx.quick else MATRIX_REPEATS),
            retries=ctx.retries,
            cv_threshold=ctx.cv_threshold,
            settings=settings,
            method_version="2",
            note=f"steady state: after {warmed:.1f} s of the same kernel, {sample_s * 1e3:.0f} ms samples",
        )
        measurement = _with_clock(measurement, clocks, ctx.sm_count)
        result.metrics[measurement.name] = measurement
        best_by_dtype[dtype] = measurement.value
        result.diagnostics[f"mma_tiles_{dtype}"] = tried
        latency_name = f"mma_latency_{dtype}"
        if latency_name in ("mma_latency_fp16", "mma_latency_bf16", "mma_latency_tf32", "mma_latency_fp8e4m3"):
            try:
                samples = [dot_latency(ctx, dtype) for _ in range(ctx.repeats)]
            except Exception as error:  # the latency is optional: record why, keep the throughput
                result.unsupported[latency_name] = f"dot latency failed: {type(error).__name__}: {str(error)[:160]}"
                continue
            samples = [v for v in samples if v > 0] or [float("nan")]
            if not all(np.isfinite(samples)):
                result.unsupported[latency_name] = "dot latency: non-positive differential timing"
                continue
            chain_tile = DTYPES[dtype][3]
            result.metrics[latency_name] = analysis.summarize(
                latency_name,
                samples,
                "cycle",
                "matrix.dot_chain",
                settings={
                    "tile": f"{chain_tile[0]}x{chain_tile[1]}x{chain_tile[2]}",
                    "num_warps": 4,
                    "counter": "clock64",
                },
                cv_threshold=0.05,
                note="(clock64 of 6000 dots - of 2000 dots) / 4000, one program",
            )

    # fp32 FMA, measured in its own steady state (after the matrix probes the clock is power-limited
    # and climbs back over about a second: short samples there measured that climb)
    device = f"cuda:{ctx.device}"
    block, warps = 4096, 8
    grid = ctx.sm_count * 16
    x = torch.rand(block, device=device)
    y = torch.empty(grid * block, device=device)
    fma_times = torch.zeros(4, dtype=torch.int64, device=device)
    sample_s = SAMPLE_S_QUICK if ctx.quick else SAMPLE_S

    def fma_launch(iters: int) -> None:
        fma_kernel[(grid,)](x, y, fma_times, iters, BLOCK=block, TIMED=True, num_warps=warps)

    probe_iters = 1024
    fma_iters = max(256, int(probe_iters * sample_s / 2 / cuda_time(lambda: fma_launch(probe_iters), launches=2)))
    fma_clocks: list[float] = []

    def fma_sample() -> float:
        seconds = cuda_time(lambda: fma_launch(fma_iters), launches=2, warmup=0)
        cycles, nanoseconds = (float(v) for v in fma_times[:2].cpu().tolist())
        if cycles > 0 and nanoseconds > 0:
            fma_clocks.append(cycles / nanoseconds * 1e9)
        return 2.0 * block * grid * fma_iters / seconds

    warmed = warm_up(lambda: fma_launch(fma_iters), WARM_S_QUICK if ctx.quick else WARM_S)
    fma = analysis.measure_with_retries(
        fma_sample,
        "fma_throughput_fp32",
        "FLOP/s",
        "matrix.fma_chain",
        repeats=ctx.repeats,
        retries=ctx.retries,
        cv_threshold=ctx.cv_threshold,
        settings={
            "block": block,
            "num_warps": warps,
            "programs": grid,
            "iters": fma_iters,
            "warm_s": round(warmed, 3),
            "sample_s": sample_s,
        },
        method_version="2",
        note=f"steady state: after {warmed:.1f} s of the same kernel, {sample_s * 1e3:.0f} ms samples",
    )
    result.metrics["fma_throughput_fp32"] = _with_clock(fma, fma_clocks, ctx.sm_count)

    # wave staircase (cross-check of the census)
    programs, seconds, info = staircase(ctx)
    flops_per_program = 2.0 * 128 * 256 * 64 * 64
    fit = analysis.fit_staircase(programs, seconds, min_width=max(8, ctx.sm_count // 2), max_width=2 * ctx.sm_count + 8)
    result.curves["matrix_wave_staircase"] = Curve(
        name="matrix_wave_staircase",
        x=programs.astype(float),
        y=programs * flops_per_program / seconds,
        x_unit="1",
        y_unit="FLOP/s",
        method="matrix.staircase",
        x_label="programs launched",
        y_label="bf16 throughput",
        attrs={"wave_width": fit.width, "fit_residual": fit.residual, **info, "tile": "128x256x64/w8", "iters": 64},
    )
    result.diagnostics["staircase_width"] = fit.width
    result.diagnostics["staircase_residual"] = fit.residual
    result.diagnostics["staircase_kernel"] = info

    # torch.matmul reference at 8192^3 bf16 (best rate), same run
    if "bf16" in best_by_dtype:
        n = 4096 if ctx.quick else 8192
        a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
        b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
        rates = [2.0 * n**3 / cuda_time(lambda: torch.matmul(a, b), launches=5, warmup=2) for _ in range(ctx.repeats)]
        best_torch = max(rates)
        result.references["torch_matmul_bf16_flops"] = best_torch
        m = result.metrics["mma_throughput_bf16"]
        result.metrics["mma_throughput_bf16"] = Measurement(
            **{
                **m.__dict__,
                "settings": {**m.settings, "torch_matmul_best_flops": best_torch, "torch_matmul_n": n},
                "note": m.note + f"; torch.matmul {n}^3 best {best_torch / 1e12:.0f} TFLOP/s in the same run",
            }
        )
    return result


def _with_clock(measurement: Measurement, clocks: list[float], sm_count: int) -> Measurement:
    """The throughput with the SM clock its samples ran at (median of the kernel's own clock64/ns readings) and
    the FLOP per cycle per SM that implies, in its settings; unchanged when no clock was read."""
    if not clocks:
        return measurement
    clock = float(np.median(clocks))
    settings = {
        **measurement.settings,
        "clock_hz_during": clock,
        "clock_hz_min": float(np.min(clocks)),
        "clock_hz_max": float(np.max(clocks)),
        "flop_per_cycle_per_sm": measurement.value / clock / sm_count,
    }
    return dataclasses.replace(measurement, settings=settings)
