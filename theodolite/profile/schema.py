"""The in-memory hardware profile: typed, immutable, validated once.

The profile is the contract between probes (which write it) and the model
(which reads it).  Everything here is plain data; HDF5 lives in ``hdf5.py``.
Units are SI base units (``B``, ``s``, ``Hz``, ``FLOP/s``, ``B/s``) plus two
documented counts: ``1`` (dimensionless) and ``cycle`` (SM clock cycles, used
for latencies because they do not depend on the clock the probe happened to
run at).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from theodolite.errors import ProfileError

SCHEMA_VERSION = "1.0"
FORMAT_MARKER = "theodolite-profile"

UNITS = frozenset({"1", "B", "s", "Hz", "FLOP/s", "B/s", "cycle", "B/cycle", "FLOP/cycle"})
SOURCES = frozenset({"measured", "datasheet"})


@dataclass(frozen=True)
class MetricSpec:
    """What a metric means, its unit, and the range a sane value lies in."""

    unit: str
    description: str
    required: bool = False
    minimum: float = 0.0  # exclusive lower bound: every metric here is positive
    maximum: float = math.inf


# Every metric the schema knows.  Probes may only write these names; the
# model may rely on the required ones being present and sane.
METRICS: Mapping[str, MetricSpec] = MappingProxyType(
    {
        # --- topology (driver + census) ---
        "sm_count": MetricSpec("1", "streaming multiprocessors (CUs on AMD) that run programs", True, 0, 10_000),
        "warp_size": MetricSpec("1", "threads per warp (wavefront)", False, 0, 128),
        "max_threads_per_block": MetricSpec("1", "largest block (workgroup) the driver allows", False, 0, 4096),
        "smem_bytes_per_block": MetricSpec(
            "B", "largest shared memory (LDS) one block can opt in to", True, 0, 1 << 24
        ),
        "smem_bytes_per_sm": MetricSpec("B", "shared memory (LDS) per SM", False, 0, 1 << 24),
        "regs_per_sm": MetricSpec("1", "32-bit registers per SM", True, 0, 1 << 22),
        "regs_per_thread_max": MetricSpec("1", "most registers one thread may use", False, 0, 1 << 12),
        "l2_bytes": MetricSpec("B", "L2 capacity the driver reports", True, 0, 1 << 34),
        "l2_partitions": MetricSpec("1", "L2 partitions (NVIDIA) or XCDs (AMD)", False, 0, 64),
        "memory_bytes": MetricSpec("B", "device memory capacity", False, 0, 1 << 44),
        "mall_bytes": MetricSpec("B", "last-level memory-side cache (AMD Infinity Cache)", False, 0, 1 << 34),
        # --- clock ---
        "clock_max_hz": MetricSpec("Hz", "SM clock under light (FMA) load: max boost", True, 1e7, 1e10),
        "clock_sustained_matrix_hz": MetricSpec(
            "Hz", "SM clock sustained over seconds of matrix load", True, 1e7, 1e10
        ),
        "clock_ramp_s": MetricSpec("s", "time from idle until the clock settles under load", False, 0, 60),
        # --- matrix units and FMA (device-wide, dense) ---
        "mma_throughput_fp16": MetricSpec("FLOP/s", "dense fp16 matrix throughput, fp32 accumulate", True, 1e9, 1e17),
        "mma_throughput_bf16": MetricSpec("FLOP/s", "dense bf16 matrix throughput, fp32 accumulate", False, 1e9, 1e17),
        "mma_throughput_tf32": MetricSpec("FLOP/s", "dense tf32 matrix throughput", False, 1e9, 1e17),
        "mma_throughput_fp8e4m3": MetricSpec("FLOP/s", "dense fp8 e4m3 matrix throughput", False, 1e9, 1e17),
        "mma_throughput_fp8e5m2": MetricSpec("FLOP/s", "dense fp8 e5m2 matrix throughput", False, 1e9, 1e17),
        "fma_throughput_fp32": MetricSpec("FLOP/s", "fp32 FMA (non-matrix) throughput", False, 1e9, 1e17),
        "mma_latency_fp16": MetricSpec(
            "cycle", "latency of one dependent dot of the smallest tile, fp16", False, 0, 1e5
        ),
        "mma_latency_bf16": MetricSpec(
            "cycle", "latency of one dependent dot of the smallest tile, bf16", False, 0, 1e5
        ),
        "mma_latency_fp8e4m3": MetricSpec(
            "cycle", "latency of one dependent dot of the smallest tile, fp8", False, 0, 1e5
        ),
        "mma_latency_tf32": MetricSpec(
            "cycle", "latency of one dependent dot of the smallest tile, tf32", False, 0, 1e5
        ),
        # --- shared memory ---
        "smem_bandwidth_per_sm": MetricSpec("B/cycle", "shared-memory (LDS) load bandwidth per SM", False, 0, 1e4),
        "smem_latency": MetricSpec("cycle", "shared-memory load-to-use latency", False, 0, 1e4),
        # --- L2 ---
        "l2_bandwidth": MetricSpec("B/s", "aggregate L2 read bandwidth, all SMs", True, 1e9, 1e15),
        "l2_latency_near": MetricSpec("cycle", "L2 hit latency, near partition", False, 0, 1e5),
        "l2_latency_far": MetricSpec("cycle", "L2 hit latency, far partition", False, 0, 1e5),
        "l2_effective_bytes": MetricSpec("B", "working set at which L2 bandwidth falls (the knee)", True, 0, 1 << 34),
        # --- HBM ---
        "hbm_read_bandwidth": MetricSpec("B/s", "device-memory read bandwidth", True, 1e9, 1e15),
        "hbm_write_bandwidth": MetricSpec("B/s", "device-memory write bandwidth", False, 1e9, 1e15),
        "hbm_copy_bandwidth": MetricSpec(
            "B/s", "device-memory copy bandwidth, bytes read plus written", False, 1e9, 1e15
        ),
        "hbm_tile_write_bandwidth": MetricSpec(
            "B/s", "device-memory write bandwidth of a GEMM output's tile-by-tile stores (128x256)", False, 1e9, 1e15
        ),
        "hbm_saturation_sms": MetricSpec("1", "SMs needed to reach 90% of the read bandwidth", False, 0, 10_000),
        "hbm_read_bandwidth_one_sm": MetricSpec(
            "B/s", "device-memory read rate one SM reaches on its own (its copy path's ceiling)", False, 1e6, 1e13
        ),
        "hbm_latency": MetricSpec("cycle", "dependent-load latency beyond every cache", False, 0, 1e5),
        # --- launch ---
        "launch_overhead": MetricSpec("s", "back-to-back empty-kernel launch cost", True, 0, 1e-2),
        "launch_overhead_graph": MetricSpec(
            "s", "GPU time per empty-kernel launch replayed back to back from a CUDA graph", False, 0, 1e-2
        ),
        "launch_roundtrip": MetricSpec("s", "launch plus synchronize round trip", False, 0, 1e-1),
        "program_start_cost": MetricSpec("s", "extra time per program (block) launched", False, 0, 1e-3),
        # --- model parameters: fitted to measured selection data (method "model-fit"), not hardware figures ---
        "model_iteration_overhead": MetricSpec(
            "cycle", "model fit: loop bookkeeping per K-iteration of one program", False, 0, 1e6
        ),
        "model_issue_rate": MetricSpec("1", "model fit: warp instructions an SM issues per cycle", False, 0, 64),
        "model_load_instructions": MetricSpec(
            "1", "model fit: warp instructions per vector load of a pointer-based kernel", False, 0, 64
        ),
        "model_latency_hiding": MetricSpec(
            "1", "model fit: fraction of the prefetched K-steps whose latency overlaps", False, 0, 1
        ),
        "model_tma_latency_hiding": MetricSpec(
            "1", "model fit: fraction of a TMA kernel's prefetched K-steps whose latency overlaps", False, 0, 1
        ),
        "model_mma_instruction_overhead": MetricSpec(
            "cycle", "model fit: cycles per matrix instruction beyond its FLOPs", False, 0, 1e4
        ),
        "model_mma_max_n": MetricSpec(
            "1", "model fit: widest N of one asynchronous matrix instruction", False, 0, 4096
        ),
        "model_mma_min_m": MetricSpec(
            "1", "model fit: tile rows below which the synchronous matrix path is used", False, 0, 4096
        ),
        "model_mma_small_rate": MetricSpec(
            "1", "model fit: synchronous matrix rate relative to the matrix rate", False, 0, 1
        ),
        "model_short_row_read_share": MetricSpec(
            "1", "model fit: HBM read rate of 128-byte rows along K, a share of 256-byte rows'", False, 0, 1
        ),
        "model_launch_extra": MetricSpec(
            "s", "model fit: launch cost beyond the profile's launch figure", False, 0, 1e-2
        ),
        "model_tma_launch_extra": MetricSpec("s", "model fit: extra cost of a TMA launch", False, 0, 1e-2),
        "model_tma_iteration_overhead": MetricSpec(
            "cycle", "model fit: extra bookkeeping per K-iteration of a TMA kernel", False, 0, 1e6
        ),
        "model_composite_iteration_overhead": MetricSpec(
            "cycle", "model fit: extra cost per K-iteration of a composite tile (its second dot)", False, 0, 1e6
        ),
        "model_scalar_load_cost": MetricSpec(
            "1", "model fit: issue cost of a scalar (misaligned) load relative to a vector load", False, 0, 1e3
        ),
        "model_scalar_k_load_share": MetricSpec(
            "1", "model fit: scalar load cost of K-contiguous rows relative to M/N-contiguous ones", False, 0, 1e3
        ),
        "model_narrow_copy_cycles": MetricSpec(
            "cycle", "model fit: cycles a warp-wide narrow (4- or 8-byte) copy costs beyond its issue", False, 0, 1e4
        ),
        "model_scalar_round_trips": MetricSpec(
            "1", "model fit: memory round trips a scalar-load K-iteration waits for at least", False, 0, 1e3
        ),
        "model_scalar_loads_in_flight": MetricSpec(
            "1", "model fit: scalar loads a thread keeps outstanding per K-iteration", False, 0, 1e9
        ),
        "model_streamk_slowdown": MetricSpec(
            "1", "model fit: Stream-K tail-slice iteration time relative to data-parallel", False, 0, 1e3
        ),
        "model_streamk_reduce_cost": MetricSpec(
            "1", "model fit: split Stream-K tail partial traffic time relative to the per-SM bandwidth", False, 0, 1e3
        ),
        "model_splitk_reduce_cost": MetricSpec(
            "1", "model fit: split-K reduction partial reads relative to the per-SM bandwidth", False, 0, 1e3
        ),
        "model_l2_bandwidth_scale": MetricSpec(
            "1", "model fit: L2 bandwidth of the kernels' tile loads relative to l2_bandwidth", False, 0, 100
        ),
        "model_hbm_bandwidth_scale": MetricSpec(
            "1", "model fit: HBM read bandwidth of the tile loads relative to hbm_read_bandwidth", False, 0, 100
        ),
        "model_tma_stream_scale": MetricSpec(
            "1", "model fit: one SM's streaming ceiling for TMA copies relative to pointer-based loads", False, 0, 100
        ),
        "model_tma_l2_bandwidth_scale": MetricSpec(
            "1", "model fit: L2 bandwidth of TMA kernels' copies relative to pointer-based tile loads", False, 0, 100
        ),
        "model_tile_overhead": MetricSpec(
            "cycle", "model fit: cycles per output tile outside the K loop", False, 0, 1e6
        ),
        "model_flatten_hiding": MetricSpec(
            "1", "model fit: share of a work item's fixed cost a flattened tile loop hides", False, 0, 1
        ),
        "model_zero_fill_cycles": MetricSpec(
            "cycle", "model fit: cycles a warp-wide masked cp.async (zero-filled prologue copy) takes", False, 0, 1e4
        ),
    }
)


def _frozen_array(values: Any) -> np.ndarray:
    array = np.array(values, dtype=np.float64).reshape(-1)
    array.setflags(write=False)
    return array


def _frozen_mapping(values: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(values or {}))


@dataclass(frozen=True)
class Measurement:
    """One measured (or datasheet) quantity with how it was obtained and how sure it is."""

    name: str
    value: float
    unit: str
    method: str
    method_version: str = "1"
    samples: np.ndarray = field(default_factory=lambda: _frozen_array([]))
    p10: float = math.nan
    p90: float = math.nan
    mad: float = math.nan
    cv: float = math.nan
    settings: Mapping[str, Any] = field(default_factory=dict)
    flagged: bool = False
    note: str = ""
    # set when calibration re-measured this metric's probe because a spread was over its limit
    # (probes/guard.py): {"limit": .., "kept": 1-based attempt, "cv": [per attempt], "value": [per attempt]}
    attempts: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "value", float(self.value))
        object.__setattr__(self, "samples", _frozen_array(self.samples))
        object.__setattr__(self, "settings", _frozen_mapping(self.settings))
        object.__setattr__(self, "attempts", _frozen_mapping(self.attempts))

    @classmethod
    def from_samples(
        cls,
        name: str,
        samples: Any,
        unit: str,
        method: str,
        *,
        method_version: str = "1",
        settings: Mapping[str, Any] | None = None,
        cv_threshold: float = 0.05,
        note: str = "",
    ) -> Measurement:
        """Median of the samples with p10/p90, MAD and CV; flagged when CV exceeds the threshold."""
        array = _frozen_array(samples)
        if array.size == 0:
            raise ProfileError(f"metric {name!r}: no samples")
        median = float(np.median(array))
        mean = float(np.mean(array))
        cv = float(np.std(array) / mean) if mean != 0 else math.inf
        return cls(
            name=name,
            value=median,
            unit=unit,
            method=method,
            method_version=method_version,
            samples=array,
            p10=float(np.percentile(array, 10)),
            p90=float(np.percentile(array, 90)),
            mad=float(np.median(np.abs(array - median))),
            cv=cv,
            settings=settings or {},
            flagged=bool(cv > cv_threshold),
            note=note,
        )


@dataclass(frozen=True)
class Curve:
    """A raw sweep: y measured against x, kept so reports can draw it and analysis can be redone."""

    name: str
    x: np.ndarray
    y: np.ndarray
    x_unit: str
    y_unit: str
    method: str
    x_label: str = ""
    y_label: str = ""
    y_low: np.ndarray | None = None  # per-point spread (e.g. p10), optional
    y_high: np.ndarray | None = None
    attrs: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for attr in ("x", "y", "y_low", "y_high"):
            values = getattr(self, attr)
            if values is not None:
                object.__setattr__(self, attr, _frozen_array(values))
        object.__setattr__(self, "attrs", _frozen_mapping(self.attrs))
        if self.x.shape != self.y.shape:
            raise ProfileError(f"curve {self.name!r}: x has {self.x.size} points but y has {self.y.size}")


@dataclass(frozen=True)
class Provenance:
    """Where and how a profile was made."""

    device_name: str
    vendor: str
    architecture: str  # sm_90, gfx942, ...
    source: str  # "measured" or "datasheet"
    created_utc: str
    theodolite_version: str
    driver: str = ""
    runtime: str = ""  # "CUDA 13.0", "ROCm 6.2"
    torch_version: str = ""
    triton_version: str = ""
    host: str = ""
    notes: str = ""
    kernel_source: str = ""  # kernels.build.kernel_source_key() of the builds ("" unknown): reuse is safe on a match


@dataclass(frozen=True)
class KernelBuild:
    """What the compiler produced for one (variant, config, dtype) on one architecture."""

    variant: str
    config_key: str
    dtype: str
    architecture: str
    n_regs: int
    n_spills: int
    shared_bytes: int
    num_stages: int
    # "vector": the binary for 16-byte aligned (or copied) operands; "vec8"/"vec4": misaligned rows read
    # as 8-/4-byte vectors (more load instructions and addresses: more registers); "scalar": element-wise
    # loads of misaligned rows gemm() does not copy; "scalar-a"/"scalar-b": A (B) element-wise beside the other
    # operand's 16-byte vectors (KERNEL_LOADS)
    loads: str = "vector"
    # the problem layout it was compiled for ("nn", "nt", "tn", "tt": which operands are K-major changes the shared
    # memory layouts and registers, and fp8's wgmma wants K-major operands) and its output's element bytes (the
    # epilogue stages the tile through shared memory in the output dtype).  "" and 0: a build from before these were
    # recorded, compiled for layout nn and the dtype's default output, taken as serving every layout
    layout: str = ""
    out_bytes: int = 0


# the binaries a config is built as, by load width
KERNEL_LOADS = ("vector", "vec8", "vec4", "scalar", "scalar-a", "scalar-b")
# the layouts and output element sizes builds are gathered for (kernels.config.LAYOUTS; 2: fp16/bf16, 4: fp32)
BUILD_LAYOUTS = ("nn", "nt", "tn", "tt")
BUILD_OUT_BYTES = (2, 4)


@dataclass(frozen=True)
class Profile:
    """A validated hardware profile.  Build with ``Profile.create`` or load with ``load_profile``."""

    provenance: Provenance
    metrics: Mapping[str, Measurement]
    curves: Mapping[str, Curve] = field(default_factory=dict)
    unsupported: Mapping[str, str] = field(default_factory=dict)
    kernel_builds: tuple[KernelBuild, ...] = ()
    schema_version: str = SCHEMA_VERSION
    origin: str = "<memory>"  # file the profile came from, for messages

    def __post_init__(self) -> None:
        object.__setattr__(self, "metrics", _frozen_mapping(self.metrics))
        object.__setattr__(self, "curves", _frozen_mapping(self.curves))
        object.__setattr__(self, "unsupported", _frozen_mapping(self.unsupported))
        object.__setattr__(self, "kernel_builds", tuple(self.kernel_builds))
        validate(self)

    def value(self, name: str) -> float:
        """The value of a metric; a clear error if the profile lacks it."""
        try:
            return self.metrics[name].value
        except KeyError:
            reason = self.unsupported.get(name)
            extra = f" (recorded as unsupported: {reason})" if reason else ""
            raise ProfileError(f"{self.origin}: profile has no metric {name!r}{extra}") from None

    def get(self, name: str, default: float | None = None) -> float | None:
        measurement = self.metrics.get(name)
        return default if measurement is None else measurement.value

    @property
    def device_name(self) -> str:
        return self.provenance.device_name

    @property
    def fingerprint(self) -> str:
        """A stable hash of every value the model may use, so a selection can name its profile."""
        digest = hashlib.sha256()
        for name in sorted(self.metrics):
            measurement = self.metrics[name]
            digest.update(f"{name}={measurement.value:.6g}{measurement.unit};".encode())
        for build in sorted(
            self.kernel_builds, key=lambda b: (b.variant, b.config_key, b.dtype, b.architecture, b.loads)
        ):
            loads = "" if build.loads == "vector" else f"|{build.loads}"  # vector-only profiles keep their hash
            kind = f"|{build.layout}|{build.out_bytes}" if build.layout or build.out_bytes else ""  # as loads
            digest.update(
                f"{build.variant}|{build.config_key}|{build.dtype}|{build.architecture}|"
                f"{build.n_regs}|{build.n_spills}|{build.shared_bytes}|{build.num_stages}{loads}{kind};".encode()
            )
        return digest.hexdigest()[:16]

    def kernel_build(
        self, variant: str, config_key: str, dtype: str, loads: str = "vector", layout: str = "", out_bytes: int = 0
    ) -> KernelBuild | None:
        """Compiler facts for a config on this profile's architecture, if calibration gathered them: the build for
        the layout and output element size, else one recorded without them (older profiles: every layout, the
        dtype's default output) where ``out_bytes`` is that default (or 0)."""
        index = self._build_index()
        layout, out_bytes = layout or "nn", out_bytes or default_out_bytes(dtype)
        found = index.get((variant, config_key, dtype, loads, layout, out_bytes))
        if found is None and (out_bytes == default_out_bytes(dtype) or variant != "tma"):
            # a layout-agnostic build; it serves another output size only where the epilogue stores from registers
            # (a TMA epilogue stages the tile in shared memory, sized by the output's element)
            found = index.get((variant, config_key, dtype, loads, "", 0))
        return found

    def has_builds(self, dtype: str | None = None, loads: str | None = None) -> bool:
        """Whether calibration gathered compiler facts at all (for ``dtype``, of the ``loads`` class); a profile
        without any (a datasheet profile) is judged by estimates instead."""
        self._build_index()
        classes: frozenset[tuple[str, str]] = self.__dict__["_build_classes"]
        if dtype is None:
            return bool(classes)
        return any(d == dtype and (loads is None or c == loads) for d, c in classes)

    def _build_index(self) -> Mapping[tuple[str, str, str, str, str, int], KernelBuild]:
        index = self.__dict__.get("_index")
        if index is None:
            index = {
                (b.variant, b.config_key, b.dtype, b.loads, b.layout, b.out_bytes): b
                for b in self.kernel_builds
                if b.architecture == self.provenance.architecture
            }
            object.__setattr__(self, "_build_classes", frozenset((key[2], key[3]) for key in index))
            object.__setattr__(self, "_index", index)
        return index


def default_out_bytes(dtype: str) -> int:
    """Element bytes of a dtype's default output (``kernels.config.Problem.output_dtype``): fp16/bf16 keep their
    dtype, fp8 gives bf16 (as torch._scaled_mm), tf32/fp32 fp32."""
    return 2 if dtype in ("fp16", "bf16") or dtype.startswith("fp8") else 4


def validate(profile: Profile) -> None:
    """Raise ProfileError naming the file and field of the first problem found."""
    where = profile.origin
    major = profile.schema_version.split(".")[0]
    if major != SCHEMA_VERSION.split(".")[0]:
        raise ProfileError(
            f"{where}: schema version {profile.schema_version} is not supported "
            f"(this theodolite reads {SCHEMA_VERSION.split('.')[0]}.x); upgrade theodolite"
        )
    if profile.provenance.source not in SOURCES:
        raise ProfileError(
            f"{where}: provenance.source is {profile.provenance.source!r}, expected one of {sorted(SOURCES)}"
        )
    for name, measurement in profile.metrics.items():
        spec = METRICS.get(name)
        if spec is None:
            raise ProfileError(f"{where}: unknown metric {name!r}")
        if measurement.name != name:
            raise ProfileError(f"{where}: metric stored as {name!r} calls itself {measurement.name!r}")
        if measurement.unit != spec.unit:
            raise ProfileError(f"{where}: metric {name!r} has unit {measurement.unit!r}, expected {spec.unit!r}")
        value = measurement.value
        if not math.isfinite(value):
            raise ProfileError(f"{where}: metric {name!r} is {value} (not a finite number)")
        if not (spec.minimum < value <= spec.maximum):
            raise ProfileError(
                f"{where}: metric {name!r} = {value:g} {spec.unit} is outside its sane range "
                f"({spec.minimum:g}, {spec.maximum:g}]"
            )
    missing = [name for name, spec in METRICS.items() if spec.required and name not in profile.metrics]
    if missing:
        raise ProfileError(f"{where}: required metric(s) missing: {', '.join(missing)}")
    for name, curve in profile.curves.items():
        if curve.name != name:
            raise ProfileError(f"{where}: curve stored as {name!r} calls itself {curve.name!r}")
        for unit in (curve.x_unit, curve.y_unit):
            if unit not in UNITS:
                raise ProfileError(f"{where}: curve {name!r} has unknown unit {unit!r}")
    for build in profile.kernel_builds:
        if build.n_regs < 0 or build.n_spills < 0 or build.shared_bytes < 0:
            raise ProfileError(f"{where}: kernel build {build.variant}/{build.config_key} has negative resources")
        if build.loads not in KERNEL_LOADS:
            raise ProfileError(f"{where}: kernel build {build.config_key} has unknown loads {build.loads!r}")
        if build.layout not in ("", *BUILD_LAYOUTS) or build.out_bytes not in (0, *BUILD_OUT_BYTES):
            raise ProfileError(
                f"{where}: kernel build {build.config_key} has unknown layout {build.layout!r} or output bytes "
                f"{build.out_bytes}"
            )
