"""Datasheet profiles: published figures for GPUs we cannot run, marked ``source=datasheet``.

They let the model be exercised on a second architecture on the CPU.  Each
figure carries its citation in the measurement's ``method`` and ``note``;
where no public figure exists, the value is an assumption and says so.
Regenerate the bundled file with ``python -m theodolite profile datasheet``.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable

from theodolite.profile.schema import METRICS, Measurement, Profile, Provenance

_CDNA3 = "AMD CDNA 3 white paper (2023) and AMD Instinct MI300X data sheet"
_HOPPER = "NVIDIA H100 Tensor Core GPU data sheet and Hopper architecture white paper (SXM5)"
_PAPER = "tritonBLAS (arXiv 2512.04226) MI300X parameters"


def _figure(name: str, value: float, source: str, note: str = "") -> Measurement:
    detail = f"{source}; {note}" if note else source
    return Measurement(name=name, value=value, unit=METRICS[name].unit, method="datasheet", note=detail)


def _profile(device: str, vendor: str, arch: str, figures: list[Measurement], notes: str) -> Profile:
    from theodolite import __version__

    return Profile(
        provenance=Provenance(
            device_name=device,
            vendor=vendor,
            architecture=arch,
            source="datasheet",
            created_utc=_dt.datetime(2026, 11, 22, tzinfo=_dt.timezone.utc).isoformat(),
            theodolite_version=__version__,
            notes=notes,
        ),
        metrics={figure.name: figure for figure in figures},
        origin=f"<datasheet {device}>",
    )


def mi300x() -> Profile:
    """AMD Instinct MI300X (OAM, 750 W): 304 CUs in 8 XCDs, 256 MB Infinity Cache, 5.3 TB/s HBM3."""
    clock = 2.1e9
    figures = [
        _figure("sm_count", 304, _CDNA3, "compute units"),
        _figure("warp_size", 64, _CDNA3, "wavefront"),
        _figure("max_threads_per_block", 1024, _CDNA3),
        _figure("smem_bytes_per_block", 64 * 1024, _CDNA3, "LDS per CU"),
        _figure("smem_bytes_per_sm", 64 * 1024, _CDNA3, "LDS per CU"),
        _figure("regs_per_sm", 4 * 512 * 64, _CDNA3, "4 SIMDs x 512 VGPRs (unified with AGPRs) x 64 lanes"),
        _figure("regs_per_thread_max", 512, _CDNA3, "VGPR + AGPR"),
        _figure("l2_bytes", 8 * 4 * 1024**2, _CDNA3, "4 MB per XCD, 8 XCDs; each XCD sees only its own 4 MB"),
        _figure("l2_partitions", 8, _CDNA3, "XCDs"),
        _figure("l2_effective_bytes", 8 * 4 * 1024**2, _CDNA3, "assumed equal to the reported size"),
        _figure("mall_bytes", 256 * 1024**2, _CDNA3, "Infinity Cache"),
        _figure("memory_bytes", 192 * 1024**3, _CDNA3),
        _figure("clock_max_hz", clock, _CDNA3, "peak engine clock"),
        _figure("clock_sustained_matrix_hz", clock, _CDNA3, "assumed: no public sustained figure"),
        _figure("mma_throughput_fp16", 1307.4e12, _CDNA3, "dense"),
        _figure("mma_throughput_bf16", 1307.4e12, _CDNA3, "dense"),
        _figure("mma_throughput_tf32", 653.7e12, _CDNA3, "dense"),
        _figure("mma_throughput_fp8e4m3", 2614.9e12, _CDNA3, "dense, OCP fp8 is emulated by fnuz on MI300X"),
        _figure("fma_throughput_fp32", 163.4e12, _CDNA3, "vector"),
        _figure("smem_bandwidth_per_sm", 128, _CDNA3, "LDS bytes per clock per CU"),
        _figure("l2_bandwidth", 8 * 2048 * clock, _CDNA3, "2 KB per clock per XCD"),
        _figure("hbm_read_bandwidth", 5.3e12, _CDNA3, "peak; sustained is lower"),
        _figure("hbm_copy_bandwidth", 5.3e12, _CDNA3, "peak; sustained is lower"),
        _figure("hbm_latency", 800, _PAPER, "assumed order of magnitude, cycles"),
        _figure("launch_overhead", 5e-6, _PAPER, "assumed: typical ROCm kernel launch"),
    ]
    return _profile("AMD Instinct MI300X", "AMD", "gfx942", figures, "datasheet figures; not measured")


def h100_sxm() -> Profile:
    """NVIDIA H100 SXM5 80 GB datasheet figures (the measured profile is the one to use on a real card)."""
    clock = 1.98e9
    figures = [
        _figure("sm_count", 132, _HOPPER),
        _figure("warp_size", 32, _HOPPER),
        _figure("max_threads_per_block", 1024, _HOPPER),
        _figure("smem_bytes_per_block", 227 * 1024, _HOPPER, "opt-in maximum"),
        _figure("smem_bytes_per_sm", 228 * 1024, _HOPPER),
        _figure("regs_per_sm", 65536, _HOPPER),
        _figure("regs_per_thread_max", 255, _HOPPER),
        _figure("l2_bytes", 50 * 1024**2, _HOPPER),
        _figure("l2_partitions", 2, _HOPPER),
        _figure("l2_effective_bytes", 50 * 1024**2, _HOPPER, "assumed equal to the reported size"),
        _figure("memory_bytes", 80 * 1024**3, _HOPPER),
        _figure("clock_max_hz", clock, _HOPPER, "max boost"),
        _figure("clock_sustained_matrix_hz", 1.755e9, _HOPPER, "assumed: the boost clock of the spec tables"),
        _figure("mma_throughput_fp16", 989.4e12, _HOPPER, "dense"),
        _figure("mma_throughput_bf16", 989.4e12, _HOPPER, "dense"),
        _figure("mma_throughput_tf32", 494.7e12, _HOPPER, "dense"),
        _figure("mma_throughput_fp8e4m3", 1978.9e12, _HOPPER, "dense"),
        _figure("fma_throughput_fp32", 66.9e12, _HOPPER),
        _figure("smem_bandwidth_per_sm", 128, _HOPPER, "bytes per clock per SM"),
        _figure("l2_bandwidth", 5.5e12, _HOPPER, "assumed: no official figure"),
        _figure("hbm_read_bandwidth", 3.35e12, _HOPPER, "peak"),
        _figure("hbm_copy_bandwidth", 3.35e12, _HOPPER, "peak"),
        _figure("launch_overhead", 4e-6, _HOPPER, "assumed"),
    ]
    return _profile("NVIDIA H100 80GB HBM3", "NVIDIA", "sm_90", figures, "datasheet figures; not measured")


DATASHEETS: dict[str, Callable[[], Profile]] = {"mi300x": mi300x, "h100-sxm": h100_sxm}
BUNDLED_DATASHEETS: dict[str, str] = {"mi300x": "amd-instinct-mi300x.h5"}
