"""Shared memory: load bandwidth per SM (bytes per clock) and load-to-use latency (cycles).

Triton gives no direct handle on shared memory, so each probe is one PTX block (emitted once per
thread: one tensor element per thread) that declares its own ``.shared`` buffer and runs its loop
with %clock64 around it.  Bandwidth: every thread of a 1024-thread block (one block per SM) loads
16 bytes per LDS.128 (conflict-free), 8 loads per iteration.  Latency: one warp chases a ring of
shared addresses (each load's result is the next address).
"""

from __future__ import annotations

import numpy as np
import triton
import triton.language as tl
from theodolite.probes import analysis
from theodolite.probes.common import ProbeContext, ProbeResult, smid

BW_THREADS = 1024
BW_UNROLL = 8

_BW_ASM_TEXT = (
    """{
.reg .u32 base, addr, i, x0, x1, x2, x3, acc;
.reg .u64 t0, t1;
.reg .pred p;
.shared .align 16 .b8 tsm_bw[16384];
mov.u32 base, tsm_bw;
mad.lo.u32 addr, $2, 16, base;
st.shared.v4.u32 [addr], {$2, $2, $2, $2};
bar.sync 0;
mov.u32 acc, 0;
mov.u32 i, 0;
mov.u64 t0, %clock64;
TSM_BW_LOOP:
"""
    + "".join(
        "ld.volatile.shared.v4.u32 {x0, x1, x2, x3}, [addr];\nxor.b32 acc, acc, x0;\nxor.b32 acc, acc, x3;\n"
        for _ in range(BW_UNROLL)
    )
    + """add.u32 i, i, 1;
setp.lt.u32 p, i, $3;
@p bra TSM_BW_LOOP;
bar.sync 0;
mov.u64 t1, %clock64;
sub.u64 $0, t1, t0;
mov.u32 $1, acc;
}"""
)

_LAT_ASM_TEXT = (
    """{
.reg .u32 base, addr, j, nxt, p32, i;
.reg .u64 t0, t1;
.reg .pred p;
.shared .align 16 .b8 tsm_lat[4096];
mov.u32 base, tsm_lat;
mov.u32 j, $2;
TSM_LAT_INIT:
add.u32 nxt, j, 1;
and.b32 nxt, nxt, 1023;
mad.lo.u32 addr, j, 4, base;
mad.lo.u32 nxt, nxt, 4, base;
st.shared.u32 [addr], nxt;
add.u32 j, j, 32;
setp.lt.u32 p, j, 1024;
@p bra TSM_LAT_INIT;
bar.sync 0;
mov.u32 p32, base;
mov.u32 i, 0;
mov.u64 t0, %clock64;
TSM_LAT_LOOP:
"""
    + "ld.shared.u32 p32, [p32];\n" * 8
    + """add.u32 i, i, 1;
setp.lt.u32 p, i, $3;
@p bra TSM_LAT_LOOP;
st.volatile.shared.u32 [tsm_lat], p32;
mov.u64 t1, %clock64;
sub.u64 $0, t1, t0;
mov.u32 $1, p32;
}"""
)


_BW_ASM = tl.constexpr(_BW_ASM_TEXT)
_LAT_ASM = tl.constexpr(_LAT_ASM_TEXT)


@triton.jit
def smem_bw_kernel(out_ptr, ITERS, THREADS: tl.constexpr):
    pid = tl.program_id(0)
    tid = tl.arange(0, THREADS)
    iters = tl.zeros([THREADS], dtype=tl.int32) + ITERS
    cycles, acc = tl.inline_asm_elementwise(
        _BW_ASM, "=l,=r,r,r", [tid, iters], dtype=(tl.int64, tl.int32), is_pure=False, pack=1
    )
    sm = smid(tid)
    tl.store(out_ptr + pid * 3 * THREADS + tid, cycles)
    tl.store(out_ptr + pid * 3 * THREADS + THREADS + tid, acc.to(tl.int64))
    tl.store(out_ptr + pid * 3 * THREADS + 2 * THREADS + tid, sm.to(tl.int64))


@triton.jit
def smem_lat_kernel(out_ptr, ITERS):
    tid = tl.arange(0, 32)
    iters = tl.zeros([32], dtype=tl.int32) + ITERS
    cycles, last = tl.inline_asm_elementwise(
        _LAT_ASM, "=l,=r,r,r", [tid, iters], dtype=(tl.int64, tl.int32), is_pure=False, pack=1
    )
    tl.store(out_ptr + tid, cycles)
    tl.store(out_ptr + 32 + tid, last.to(tl.int64))


def bandwidth_sample(ctx: ProbeContext, iters: int) -> tuple[float, int]:
    """(bytes per cycle per SM, distinct SMs used) of one launch with one block per SM."""
    import torch

    grid = ctx.sm_count
    out = torch.zeros(grid * 3 * BW_THREADS, dtype=torch.int64, device=f"cuda:{ctx.device}")
    smem_bw_kernel[(grid,)](out, iters, THREADS=BW_THREADS, num_warps=BW_THREADS // 32)
    torch.cuda.synchronize(ctx.device)
    rows = out.view(grid, 3, BW_THREADS).cpu().numpy()
    cycles = rows[:, 0, :].max(axis=1).astype(np.float64)
    per_block_bytes = BW_THREADS * 16.0 * BW_UNROLL * iters
    distinct = int(np.unique(rows[:, 2, 0]).size)
    return float(np.median(per_block_bytes / cycles)), distinct


def latency_sample(ctx: ProbeContext, iters: int) -> float:
    import torch

    out = torch.zeros(64, dtype=torch.int64, device=f"cuda:{ctx.device}")
    smem_lat_kernel[(1,)](out, iters, num_warps=1)
    torch.cuda.synchronize(ctx.device)
    return float(out[:32].max().item()) / (8 * iters)


def run(ctx: ProbeContext) -> ProbeResult:
    result = ProbeResult()
    iters = 2000 if ctx.quick else 8000
    bandwidth_sample(ctx, 16)
    distinct: list[int] = []

    def bw() -> float:
        value, count = bandwidth_sample(ctx, iters)
        distinct.append(count)
        return value

    result.metrics["smem_bandwidth_per_sm"] = analysis.measure_with_retries(
        bw,
        "smem_bandwidth_per_sm",
        "B/cycle",
        "smem.lds128_asm",
        repeats=ctx.repeats,
        retries=ctx.retries,
        cv_threshold=ctx.cv_threshold,
        settings={"threads_per_block": BW_THREADS, "loads_per_iter": BW_UNROLL, "iters": iters, "bytes_per_load": 16},
    )
    result.diagnostics["smem_bw_distinct_sms"] = distinct
    latency_sample(ctx, 16)
    result.metrics["smem_latency"] = analysis.measure_with_retries(
        lambda: latency_sample(ctx, 2000),
        "smem_latency",
        "cycle",
        "smem.chase_asm",
        repeats=ctx.repeats,
        retries=ctx.retries,
        cv_threshold=ctx.cv_threshold,
        settings={"ring_entries": 1024, "hops": 16000},
        note="ld.shared.u32 pointer chase, one warp, cycles per hop",
    )
    return result
