"""Topology: driver limits and the SM census by %smid.

The census launches many short programs, each writing the %smid of the SM that ran it; the
number of distinct ids is the SM count that runs programs.  The throughput-vs-programs staircase
(matrix.py) cross-checks it.
"""

from __future__ import annotations

import ctypes
from typing import Any

import triton
import triton.language as tl
from theodolite.probes.common import ProbeContext, ProbeResult, smid

from theodolite.profile.schema import Measurement

METHOD = "topology"

# CUdevice_attribute values (cuda.h)
_ATTRIBUTES = {
    "max_threads_per_block": 1,
    "max_regs_per_block": 12,
    "multiprocessor_count": 16,
    "warp_size": 10,
    "l2_cache_size": 38,
    "max_threads_per_sm": 39,
    "smem_per_sm": 81,
    "regs_per_sm": 82,
    "smem_per_block_optin": 97,
    "clock_rate_khz": 13,
    "memory_clock_rate_khz": 36,
    "memory_bus_width": 37,
}


def driver_attributes(device: int) -> dict[str, int]:
    """cuDeviceGetAttribute for the attributes above (libcuda through ctypes); {} if unavailable."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return {}
    lib.cuInit(0)
    handle = ctypes.c_int()
    if lib.cuDeviceGet(ctypes.byref(handle), device) != 0:
        return {}
    values: dict[str, int] = {}
    for name, code in _ATTRIBUTES.items():
        value = ctypes.c_int()
        if lib.cuDeviceGetAttribute(ctypes.byref(value), code, handle) == 0:
            values[name] = int(value.value)
    return values


@triton.jit
def census_kernel(out_ptr, SPIN: tl.constexpr):
    """Each program writes the %smid it ran on (after a short spin so programs spread)."""
    pid = tl.program_id(0)
    z = tl.zeros([32], tl.int32)
    acc = z.to(tl.float32) + pid
    for _ in range(SPIN):
        acc = acc * 1.0001 + 0.5
    sm = tl.max(smid(z + (acc > 1e30).to(tl.int32)))
    tl.store(out_ptr + pid, sm)


def _driver_measurement(name: str, value: float, unit: str, source: str) -> Measurement:
    return Measurement.from_samples(name, [value], unit, METHOD, settings={"source": source})


def run(ctx: ProbeContext) -> ProbeResult:
    import torch

    result = ProbeResult()
    props = torch.cuda.get_device_properties(ctx.device)
    attrs: dict[str, Any] = driver_attributes(ctx.device)
    result.diagnostics["driver_attributes"] = dict(attrs)
    sm_driver = int(attrs.get("multiprocessor_count", props.multi_processor_count))
    l2 = int(attrs.get("l2_cache_size", getattr(props, "L2_cache_size", 0)))
    ctx.l2_bytes = l2
    ctx.capability = (props.major, props.minor)

    def put(name: str, value: Any, unit: str, source: str) -> None:
        if value:
            result.metrics[name] = _driver_measurement(name, float(value), unit, source)

    put("warp_size", attrs.get("warp_size", getattr(props, "warp_size", 32)), "1", "driver")
    put("max_threads_per_block", attrs.get("max_threads_per_block"), "1", "driver")
    optin = attrs.get("smem_per_block_optin") or getattr(props, "shared_memory_per_block_optin", 0)
    put("smem_bytes_per_block", optin, "B", "driver (opt-in)")
    put(
        "smem_bytes_per_sm",
        attrs.get("smem_per_sm") or getattr(props, "shared_memory_per_multiprocessor", 0),
        "B",
        "driver",
    )
    put("regs_per_sm", attrs.get("regs_per_sm") or getattr(props, "regs_per_multiprocessor", 0), "1", "driver")
    put("regs_per_thread_max", 255, "1", "PTX ISA limit (255 per thread on sm_50+)")
    put("l2_bytes", l2, "B", "driver")
    put("memory_bytes", props.total_memory, "B", "driver")

    # census: repeat and count distinct ids
    programs = sm_driver * 16
    counts = []
    out = torch.empty(programs, dtype=torch.int32, device=f"cuda:{ctx.device}")
    for _ in range(ctx.repeats):
        out.fill_(-1)
        census_kernel[(programs,)](out, SPIN=2000, num_warps=1)
        torch.cuda.synchronize(ctx.device)
        ids = out.cpu()
        counts.append(int(torch.unique(ids[ids >= 0]).numel()))
    census = max(counts)
    result.metrics["sm_count"] = Measurement.from_samples(
        "sm_count",
        counts,
        "1",
        "topology.census",
        settings={"programs": programs, "driver_multiprocessor_count": sm_driver, "max_smid_seen": int(ids.max())},
        cv_threshold=0.0,
        note=f"distinct %smid over {programs} programs; driver says {sm_driver}",
    )
    # the value is the largest census (a short run can miss an SM); keep samples for the spread
    result.metrics["sm_count"] = Measurement(
        **{**result.metrics["sm_count"].__dict__, "value": float(census), "flagged": census != sm_driver}
    )
    ctx.sm_count = census
    result.references["sm_count_driver"] = float(sm_driver)
    result.references["l2_bytes_driver"] = float(l2)
    return result
