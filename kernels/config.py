"""What the bundled GEMM kernels accept: problems, configs, their space and legality.

Pure Python (no torch, no Triton) so the model can enumerate and judge configs in
microseconds on any machine.  Every hardware limit comes from the profile through
``KernelLimits``; the only facts written here are facts about *our kernels*
(which tiles they are written for, which features a variant needs).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from theodolite.errors import TheodoliteError

if TYPE_CHECKING:
    from theodolite.profile.schema import KernelBuild, Profile

VARIANTS: tuple[str, ...] = ("persistent", "streamk", "splitk", "tma")
FLATTENABLE: tuple[str, ...] = ("persistent", "tma")  # one loop over (tile, K step): tl.range(flatten=True)
LAYOUTS: tuple[str, ...] = ("nn", "nt", "tn", "tt")  # A then B; 't' = stored transposed (column-major)

# Input dtype name -> element size in bytes.  Names are the profile's metric suffixes.
DTYPE_BYTES: dict[str, int] = {
    "fp16": 2,
    "bf16": 2,
    "tf32": 4,  # fp32 storage, tf32 matrix math
    "fp32": 4,  # fp32 storage, ieee fp32 math (no tensor cores)
    "fp8e4m3": 1,
    "fp8e5m2": 1,
}
# Which profile throughput metric runs a dtype's inner product.
DTYPE_THROUGHPUT_METRIC: dict[str, str] = {
    "fp16": "mma_throughput_fp16",
    "bf16": "mma_throughput_bf16",
    "tf32": "mma_throughput_tf32",
    "fp32": "fma_throughput_fp32",
    "fp8e4m3": "mma_throughput_fp8e4m3",
    "fp8e5m2": "mma_throughput_fp8e5m2",
}
OUT_DTYPES: tuple[str, ...] = ("fp16", "bf16", "fp32")

# Hardware features each variant or dtype needs, as the minimum NVIDIA compute capability
# (a property of the instructions our kernels use, not of any particular GPU).
_MIN_CAPABILITY = {"tma": 90, "fp8e4m3": 89, "fp8e5m2": 89}

# Tiles under 64 rows run the synchronous matrix path (mma.sync).  Triton 3.6 gives it fp8 operands as fp16: each
# fragment is unpacked after its load from shared memory (sm_90 SASS of fp8 splitk/16x64x512: HMMA.16816.F32 at 64
# per warp and K-step, beside 256 F2FP.F16.E4M3.UNPACK_B), so those tiles multiply at the fp16 rate.
SYNC_PATH_DTYPE = {"fp8e4m3": "fp16", "fp8e5m2": "fp16"}

ALIGN_BYTES = 16  # vector loads and TMA descriptors need 16-byte aligned rows
# a padded copy's rows start on this boundary: against B's unpadded 24576-byte pitch (a 4 KiB multiple), a pitch of B
# that is an odd multiple of 16 bytes slows persistent 128x256x64 at 5120x12288x10752 1.64x (H100) / 1.29x (H200),
# TMA 1.29x / 1.08x; on 32 bytes 1.17x / 1.05x; on 128 bytes 1.15x / 1.00x (experiments/row_pitch.py)
COPY_PITCH_BYTES = 128
ASYNC_COPY_MIN_BYTES = 4  # narrower loads cannot be asynchronous copies (cp.async): Triton leaves them unpipelined
SPLITK_MAX_WAVES = 2  # split-K is legal only while the output has at most this many waves of tiles
# A build that spills more than this many bytes of registers per thread is illegal.  A few spilled address registers
# cost little, more cost multiples: H200 bf16 nt timings of every timed config (the validation sweeps) over the
# model's time of each, relative to the shape's median, by the nt build's spill (experiments/spill_cost.py): none
# 0.94-1.00x, 1-64 B 0.93-1.15x (splitk/16x64x128 element-wise spilling 52 B was the best config of several shapes),
# 65-128 B 1.03-1.21x, 129-400 B 1.2-2.0x, over 400 B 1.7x.
# THEODOLITE_SPILL_MAX_BYTES (read at import) overrides it for side-by-side experiments.
SPILL_MAX_BYTES = int(os.environ.get("THEODOLITE_SPILL_MAX_BYTES", "64"))
# Stream-K (hybrid): the tiles past the last full wave are split along K into at most this many equal slices,
# each at least this many K-steps long; the slices' fp32 partials are reduced in row chunks of 1/TAIL_CHUNKS tile
TAIL_MAX_SPLIT = 8
TAIL_MIN_STEPS = 4
TAIL_CHUNKS = 8


class ConfigError(TheodoliteError):
    """A config or problem that the kernels cannot run."""


@dataclass(frozen=True, order=True)
class GemmConfig:
    """One launch configuration of one kernel variant."""

    variant: str
    block_m: int
    block_n: int
    block_k: int
    group_m: int = 8
    num_warps: int = 4
    num_stages: int = 3
    split_k: int = 1  # splitk: K slices; other variants: 1
    flatten: bool = False  # persistent/tma: tile and K loops fused, so the next tile's loads overlap this epilogue
    # tma: a second B part this wide beside block_n (0: none), so the output tile is block_m x (block_n + block_n1)
    # with powers of two on either side (a composite tile: one A tile feeds two dots; see _TMA_COMPOSITE)
    block_n1: int = 0

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise ConfigError(f"unknown kernel variant {self.variant!r}; expected one of {', '.join(VARIANTS)}")
        for name in ("block_m", "block_n", "block_k", "group_m", "num_warps", "num_stages", "split_k"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ConfigError(f"config field {name} must be a positive int, got {value!r}")
        for name in ("block_m", "block_n", "block_k", "num_warps"):
            value = getattr(self, name)
            if value & (value - 1):
                raise ConfigError(f"config field {name} must be a power of two, got {value}")
        if self.split_k != 1 and self.variant != "splitk":
            raise ConfigError(f"split_k={self.split_k} needs variant 'splitk', not {self.variant!r}")
        if not isinstance(self.flatten, bool):
            raise ConfigError(f"config field flatten must be a bool, got {self.flatten!r}")
        if self.flatten and self.variant not in FLATTENABLE:
            raise ConfigError(f"flatten needs variant persistent or tma, not {self.variant!r}")
        if not isinstance(self.block_n1, int) or isinstance(self.block_n1, bool) or self.block_n1 < 0:
            raise ConfigError(f"config field block_n1 must be a non-negative int, got {self.block_n1!r}")
        if self.block_n1:
            if self.block_n1 & (self.block_n1 - 1) or self.block_n1 < 16 or self.block_n1 > self.block_n:
                raise ConfigError(
                    f"block_n1 must be a power of two from 16 to block_n={self.block_n}, got {self.block_n1}"
                )
            if self.variant != "tma" or self.flatten:
                raise ConfigError(f"a composite tile (block_n1={self.block_n1}) needs variant 'tma', not flattened")

    @property
    def tile_n(self) -> int:
        """Columns of the output tile: block_n, plus block_n1 for a composite tile."""
        return self.block_n + self.block_n1

    @property
    def key(self) -> str:
        """Stable short name, e.g. ``persistent/128x256x64/g8/w8/s3/k1`` (used in profiles and results);
        a flattened loop adds ``/f``; a composite tile writes its width as ``block_n+block_n1``
        (``tma/128x128+32x64/g8/w8/s5/k1``)."""
        width = f"{self.block_n}+{self.block_n1}" if self.block_n1 else f"{self.block_n}"
        return (
            f"{self.variant}/{self.block_m}x{width}x{self.block_k}/g{self.group_m}"
            f"/w{self.num_warps}/s{self.num_stages}/k{self.split_k}" + ("/f" if self.flatten else "")
        )

    @classmethod
    def from_key(cls, key: str) -> GemmConfig:
        try:
            parts = key.split("/")
            flatten = len(parts) == 7 and parts[6] == "f"
            variant, tile, group, warps, stages, split = parts[:6] if flatten else parts
            bm, width, bk = tile.split("x")
            bn, plus, bn1 = width.partition("+")
            if plus and not bn1:
                raise ValueError(width)
            fields = (int(group[1:]), int(warps[1:]), int(stages[1:]), int(split[1:]))
            return cls(variant, int(bm), int(bn), int(bk), *fields, flatten=flatten, block_n1=int(bn1) if bn1 else 0)
        except ConfigError:
            raise
        except Exception:
            raise ConfigError(f"not a config key: {key!r} (expected e.g. persistent/128x256x64/g8/w8/s3/k1)") from None


@dataclass(frozen=True)
class Problem:
    """C[batch, M, N] = A[batch, M, K] @ B[batch, K, N]; what the model and the kernels are asked."""

    m: int
    n: int
    k: int
    dtype: str = "bf16"
    batch: int = 1
    layout: str = "nn"
    out_dtype: str | None = None  # None: the input dtype (bf16 for fp8 inputs, as torch._scaled_mm; fp32 for tf32)
    a_row_stride_aligned: bool | None = None  # None: derived from the shape (contiguous storage)
    b_row_stride_aligned: bool | None = None

    def __post_init__(self) -> None:
        for name in ("m", "n", "k", "batch"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ConfigError(f"problem size {name} must be a non-negative int, got {value!r}")
        if self.dtype not in DTYPE_BYTES:
            raise ConfigError(f"unsupported dtype {self.dtype!r}; expected one of {', '.join(DTYPE_BYTES)}")
        if self.layout not in LAYOUTS:
            raise ConfigError(f"unknown layout {self.layout!r}; expected one of {', '.join(LAYOUTS)}")
        if self.out_dtype is not None and self.out_dtype not in OUT_DTYPES:
            raise ConfigError(f"unsupported output dtype {self.out_dtype!r}; expected one of {', '.join(OUT_DTYPES)}")

    @property
    def element_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def output_dtype(self) -> str:
        if self.out_dtype is not None:
            return self.out_dtype
        if self.dtype.startswith("fp8"):
            return "bf16"
        return self.dtype if self.dtype in ("fp16", "bf16") else "fp32"

    @property
    def output_bytes(self) -> int:
        return DTYPE_BYTES[self.output_dtype]

    @property
    def flops(self) -> float:
        return 2.0 * self.batch * self.m * self.n * self.k

    @property
    def a_aligned(self) -> bool:
        """Rows of A (along its contiguous dimension) start on 16-byte boundaries."""
        if self.a_row_stride_aligned is not None:
            return self.a_row_stride_aligned
        leading = self.k if self.layout[0] == "n" else self.m
        return (leading * self.element_bytes) % ALIGN_BYTES == 0

    @property
    def b_aligned(self) -> bool:
        if self.b_row_stride_aligned is not None:
            return self.b_row_stride_aligned
        leading = self.n if self.layout[1] == "n" else self.k
        return (leading * self.element_bytes) % ALIGN_BYTES == 0


@dataclass(frozen=True)
class KernelLimits:
    """The hardware limits legality needs, read from a profile (never hard-coded)."""

    architecture: str  # "sm_90", "gfx942"
    smem_bytes_per_block: int
    regs_per_sm: int
    regs_per_thread_max: int
    max_threads_per_block: int
    warp_size: int
    sm_count: int
    smem_bytes_per_sm: int = 0  # 0: unknown, taken as smem_bytes_per_block
    max_threads_per_sm: int = 2048

    @classmethod
    def from_profile(cls, profile: Profile) -> KernelLimits:
        get = profile.get
        return cls(
            architecture=profile.provenance.architecture,
            smem_bytes_per_block=int(profile.value("smem_bytes_per_block")),
            regs_per_sm=int(profile.value("regs_per_sm")),
            regs_per_thread_max=int(get("regs_per_thread_max", 255) or 255),
            max_threads_per_block=int(get("max_threads_per_block", 1024) or 1024),
            warp_size=int(get("warp_size", 32) or 32),
            sm_count=int(profile.value("sm_count")),
            smem_bytes_per_sm=int(get("smem_bytes_per_sm", 0) or 0),
            max_threads_per_sm=int(get("max_threads_per_sm", 2048) or 2048),
        )

    @property
    def capability(self) -> int | None:
        """NVIDIA compute capability as an int (90 for sm_90/sm_90a); None for other vendors."""
        if not self.architecture.startswith("sm_"):
            return None
        digits = "".join(ch for ch in self.architecture[3:] if ch.isdigit())
        return int(digits) if digits else None

    def supports(self, feature: str) -> bool:
        """Whether this architecture has what a variant or dtype needs (e.g. 'tma', 'fp8e4m3')."""
        needed = _MIN_CAPABILITY.get(feature)
        if needed is None:
            return True
        capability = self.capability
        return capability is not None and capability >= needed


# --------------------------------------------------------------------------------------------
# The declared config space.  Kept moderate on purpose: the validation oracle times all of it.
# --------------------------------------------------------------------------------------------


# Tiles are written for 2-byte inputs; block_k scales with the element size so a K step
# always moves the same number of bytes (fp8: twice the elements, fp32: half).
def _scale_k(block_k: int, element: int) -> int:
    return max(16, block_k * 2 // element)


# (block_m, block_n, block_k at 2 bytes, warps, stages, flatten).  flatten: the tile and K loops fused
# (the next tile's loads are issued during this tile's epilogue) where that measured faster for the
# entry on H100 bf16 LLM shapes (>= 5% geomean, no shape worse than 0.96x; tma 128x256/64x256: 1-2%);
# the other entries lost with it (up to 0.66x: tma 128x128 w8 s3); experiments/README.md.
_PERSISTENT = (
    (128, 256, 64, 8, 3, True),
    (128, 256, 64, 8, 4, True),
    (256, 128, 64, 8, 3, True),
    (256, 128, 64, 8, 4, False),
    (128, 128, 64, 8, 3, True),
    (128, 128, 64, 8, 4, True),
    (128, 128, 64, 4, 4, False),
    (128, 128, 128, 8, 3, True),
    (128, 64, 64, 4, 3, False),
    (128, 64, 64, 4, 4, True),
    (64, 128, 64, 4, 3, False),
    (64, 128, 64, 4, 4, False),
    (64, 128, 128, 4, 3, False),
    (64, 256, 64, 8, 3, False),
    (64, 64, 64, 4, 4, False),
    (64, 64, 128, 4, 4, True),
    (32, 64, 128, 4, 4, False),
    (32, 128, 64, 4, 4, False),
    (16, 64, 128, 4, 4, False),
    (16, 128, 128, 4, 4, False),
    (16, 256, 64, 4, 4, False),
    # narrow N (tall-skinny outputs, N <= 32): a 64-wide tile wastes most of each MMA and store
    (128, 32, 64, 4, 4, False),
    (64, 32, 128, 4, 4, False),
    # short K (K under ~100): a 64-deep K-step issues every masked row past K, element-wise where rows are
    # misaligned; 16- and 32-deep steps cut that (H100 random-dev K < 100, best vs torch.matmul: dev033 1437x2222x18
    # 0.50x -> 0.85x, dev135 2051x2319x38 0.73x -> 1.01x; experiments/short_k.py)
    (16, 64, 32, 4, 2, False),
    (16, 64, 16, 4, 2, False),
    (64, 64, 32, 4, 2, False),
    (64, 64, 16, 4, 2, False),
    (128, 64, 16, 4, 2, False),
    (256, 128, 16, 8, 2, False),
    # deep pipelines (6-12 stages, up to 192 KB of shared memory): cuBLAS runs small tiles 8-16 stages deep where M is
    # small, and there a K-step waits on loaded latency that 4 stages do not cover (H100 llm 128x4096x4096: 64x64x64
    # s4 31.1 us, s8 25.3, s12 22.9, torch.matmul 22.6; best vs torch.matmul geomean over llm 0.987x -> 0.998x on the
    # H100, 0.991x -> 1.003x on the H200; experiments/deep_stages.py).  The model ranks
    # them with its loaded-latency K-step (model.core.stage_wait).  A 64x64x128 s6 was left out: it wins short-K shapes
    # by not being flattened, not by its depth, and M = 1 picks it where split-K 16x64x128 is 1.5x faster
    (64, 64, 64, 4, 8, False),
    (64, 64, 64, 4, 12, False),
    (64, 128, 64, 4, 8, False),
    (128, 128, 64, 8, 6, False),
)
_TMA = (
    (128, 256, 64, 8, 3, True),
    (128, 256, 64, 8, 4, True),
    (256, 128, 64, 8, 3, False),
    (128, 128, 64, 8, 3, False),
    (128, 128, 64, 8, 4, False),
    (128, 128, 64, 4, 4, False),
    (128, 64, 64, 4, 4, False),
    (64, 128, 64, 4, 4, False),
    (64, 64, 128, 4, 4, True),
    (64, 256, 64, 8, 4, True),
    # deep pipelines, as _PERSISTENT's
    (64, 128, 64, 4, 8, False),
    (128, 128, 64, 8, 6, False),
)
# Composite tiles: cuBLAS wins aligned mid-size shapes with tiles such as 128x160, 128x192 and 320x128 that make the
# output one full wave of the SMs, which Triton's power-of-two blocks cannot express; a TMA program with two
# accumulators (block_m x block_n and block_m x block_n1, one A tile) can.  H100, host descriptors (experiments/
# composite_tiles.py): dev124 768x3200x4224 128x(128+32) s5 41.2 us against the space's best 47.3 (0.75x -> 0.86x of
# torch.matmul), llama3-70b.qkv 512x10240x8192 128x(256+64) s3 125.3 against 138.5 (0.86x -> 0.95x), llama3-8b.qkv
# 512x6144x4096 128x(128+64) s5 43.2 against 47.3 (0.90x -> 0.99x), dev104 64x(128+32) s6 0.89x -> 0.92x.  Where a
# power-of-two tile fills the SMs they lose (the second dot reads the A tile again: 128x(128+32) 0.70x on
# 512x4096x14336), so only the five that won somewhere are declared.
# (block_m, block_n, block_n1, block_k at 2 bytes, warps, stages)
_TMA_COMPOSITE = (
    (128, 128, 32, 64, 8, 5),
    (128, 128, 64, 64, 8, 5),
    (128, 256, 64, 64, 8, 3),
    (64, 128, 32, 64, 4, 6),
    (64, 128, 64, 64, 4, 5),
)
_STREAMK = (
    (128, 256, 64, 8, 3),
    (128, 128, 64, 8, 4),
    (128, 128, 64, 4, 4),
    (128, 64, 64, 4, 4),
    (64, 128, 64, 4, 4),
    (64, 64, 64, 4, 4),
)
# (block_m, block_n, block_k at 2 bytes, warps, stages, split_k).  Deep splits compile without spills since the
# reduction loops over the slices; the splits here are those that were ever the fastest config of a shape in the
# bf16 sweeps of both suites on the H100 and H200 (592 shape sweeps, 2026-11-23: 64x64 k16, 64x128
# k4 and k8, 128x128 k4 and k8, 128x256 k2-k8 never were, and the model ranked the large-tile ones too fast).
# 16x64x128 k32 and k64: a handful of output tiles over a long K, read element-wise (one latency per K-step), runs
# faster the more slices share its K-steps (H100 dev039 19x127x14455: k16 26.4 us, k32 16.5, k64 15.3, torch.matmul
# 14.8; split-K tiles 128 rows tall never won: experiments/deep_splitk.py)
# Splits that are not powers of two, and 64x64x64 at 8 stages: the off-space candidates that beat the sweep's best on
# the H100 shapes nearest under issue 4's bar (experiments/near_bar.py: dev044 128x1280x2944 64x64x64 s8 k3
# 0.83x -> 0.85x of torch.matmul in the final round, dev091 344x54x2858 0.84x -> 0.88x, dev161 656x45x8053
# 64x64x128 k12 0.87x -> 1.0x); each slice takes ceil(K-steps / split) of them.
_SPLITK = (
    tuple((16, 64, 128, 4, 4, split) for split in (2, 4, 6, 8, 16, 32, 64))
    + tuple((32, 128, 64, 4, 4, split) for split in (2, 4, 8, 16))
    + tuple((64, 64, 128, 4, 4, split) for split in (2, 3, 4, 5, 8, 12))
    + tuple((64, 64, 64, 4, 8, split) for split in (2, 3))
    + tuple((64, 128, 64, 4, 4, split) for split in (2, 16))
    + ((128, 128, 64, 8, 3, 2),)
)


# Decode (M <= DECODE_MAX_M against large weights: what LLM serving runs most).  The time there is the weights read
# once from HBM, so these tiles keep every M row in one 16- to 64-row tile, move more bytes of B per K-step (BLOCK_K
# 256, or 128 with 4-6 stages: 100-200 KB of loads in flight per SM) and split K so that the output's few column tiles
# still put a program on every SM.  They reuse the split-K and persistent kernels (mma_tile's cp.async pipeline
# already streams B in 16-byte vectors; the model prices them as it prices those variants) and are legal only for
# M <= DECODE_MAX_M (legality's shape rule), so they add nothing to the sweeps of larger shapes.
# (block_m, block_n, block_k at 2 bytes, warps, stages, split_k) for splitk; (..., flatten) for persistent
DECODE_MAX_M = 64
_DECODE_SPLITK = (
    tuple((16, 128, 128, 4, 4, split) for split in (2, 4, 8, 16))
    + tuple((16, 64, 256, 4, 3, split) for split in (2, 4, 8))
    + tuple((64, 128, 128, 8, 3, split) for split in (2, 4))
)
_DECODE_PERSISTENT = (
    (16, 128, 128, 4, 6, False),
    (16, 64, 256, 4, 4, False),
    # 64-row tiles six stages deep (144-192 KB in flight per SM): the weights of 16-48 MB in fp8 and of 32-48 MB in
    # bf16, where one program per SM streams too few bytes (H200, experiments/decode_depth.py: fp8 llama3-8b.o
    # 64x32x256 s4 8.70-9.09 us -> s6 8.08-8.23, qkv 64x64x256 10.19 -> 9.84; bf16 qkv M=32 64x64x128 20.7 -> 19.5)
    (64, 32, 128, 4, 6, False),
    (64, 64, 128, 4, 6, False),
)


@lru_cache(maxsize=64)
def _decode_space(dtype: str, variant: str) -> tuple[GemmConfig, ...]:
    """The decode family's configs of one variant for a dtype (block_k scaled as the rest of the space)."""
    element = DTYPE_BYTES[dtype]
    if variant == "splitk":
        return tuple(
            GemmConfig("splitk", bm, bn, _scale_k(bk, element), 8, w, s, split)
            for bm, bn, bk, w, s, split in _DECODE_SPLITK
        )
    if variant == "persistent":
        return tuple(
            GemmConfig("persistent", bm, bn, _scale_k(bk, element), 8, w, s, flatten=flat)
            for bm, bn, bk, w, s, flat in _DECODE_PERSISTENT
        )
    return ()


@lru_cache(maxsize=16)
def _decode_keys(dtype: str) -> frozenset[str]:
    """Keys of the dtype's decode configs that the rest of its space does not declare too (a scaled block_k can
    meet an entry of the base tables: fp32's 16x64x128 s4)."""
    base = {c.key for v in VARIANTS for c in _base_space(dtype, v)}
    return frozenset(c.key for v in VARIANTS for c in _decode_space(dtype, v) if c.key not in base)


def decode_configs(dtype: str) -> tuple[GemmConfig, ...]:
    """The decode family's configs of a dtype, in config-space order (those the base tables do not declare)."""
    keys = _decode_keys(dtype)
    return tuple(c for c in config_space(dtype) if c.key in keys)


def is_decode(config: GemmConfig, dtype: str) -> bool:
    """Whether a config is one of the decode family's for ``dtype`` (legal only for M <= DECODE_MAX_M)."""
    return config.key in _decode_keys(dtype)


@lru_cache(maxsize=64)
def _space(dtype: str, variant: str) -> tuple[GemmConfig, ...]:
    return tuple(dict.fromkeys(_base_space(dtype, variant) + _decode_space(dtype, variant)))


def _base_space(dtype: str, variant: str) -> tuple[GemmConfig, ...]:
    element = DTYPE_BYTES[dtype]
    if variant == "splitk":
        return tuple(
            GemmConfig("splitk", bm, bn, _scale_k(bk, element), 8, w, s, split) for bm, bn, bk, w, s, split in _SPLITK
        )
    if variant == "streamk":
        return tuple(GemmConfig(variant, bm, bn, _scale_k(bk, element), 8, w, s) for bm, bn, bk, w, s in _STREAMK)
    table = {"persistent": _PERSISTENT, "tma": _TMA}[variant]
    composite = _TMA_COMPOSITE if variant == "tma" else ()
    # dict.fromkeys: entries that scale to the same config (fp32's 16- and 32-deep short-K steps) once, in order
    return tuple(dict.fromkeys(
        [GemmConfig(variant, bm, bn, _scale_k(bk, element), 8, w, s, flatten=flat) for bm, bn, bk, w, s, flat in table]
        + [GemmConfig(variant, bm, bn, _scale_k(bk, element), 8, w, s, block_n1=bn1)
           for bm, bn, bn1, bk, w, s in composite]
    ))  # fmt: skip


def config_space(dtype: str, variants: tuple[str, ...] | None = None) -> tuple[GemmConfig, ...]:
    """Every config the kernels declare for a dtype (before legality), in a fixed order."""
    if dtype not in DTYPE_BYTES:
        raise ConfigError(f"unsupported dtype {dtype!r}; expected one of {', '.join(DTYPE_BYTES)}")
    chosen = VARIANTS if variants is None else variants
    for variant in chosen:
        if variant not in VARIANTS:
            raise ConfigError(f"unknown kernel variant {variant!r}; expected one of {', '.join(VARIANTS)}")
    return tuple(config for variant in chosen for config in _space(dtype, variant))


# split-K reduces cooperatively (every slice a share of the tile's row chunks, after all arrived: kernels' splitk SPIN)
# when at least this many slices hold at least this many partial bytes per tile and the whole grid is one program per
# SM or fewer (every slice resident, so the spin-wait cannot starve); measured on the H100 (experiments/
# splitk_reduce.py): 64x64x128 k8 0.86-0.94 of the last arriver's time, 32x128x64 k8 0.93, 16x64x128
# k32 0.93, while 32 KB of partials per tile (16x64x128 k8) or two slices lose 2-19%
COOP_MIN_SPLIT = 4
COOP_MIN_PARTIAL_BYTES = 128 * 1024


def cooperative_capable(config: GemmConfig) -> bool:
    """Whether a split-K config is deep enough to reduce cooperatively (``COOP_MIN_*``), whatever the shape."""
    return (
        config.variant == "splitk"
        and config.split_k >= COOP_MIN_SPLIT
        and config.split_k * config.block_m * config.block_n * 4 >= COOP_MIN_PARTIAL_BYTES
    )


def cooperative_reduction(config: GemmConfig, tiles: int, sm_count: int) -> bool:
    """Whether a split-K launch of ``tiles`` output tiles (batch included) reduces cooperatively: a capable config
    whose grid is one program per SM or fewer."""
    return cooperative_capable(config) and tiles * config.split_k <= sm_count


def streamk_partition(tiles: int, programs: int, k_steps: int) -> tuple[int, int]:
    """(data-parallel tiles, K-slices per remaining tile) of the Stream-K variant.

    Full waves of ``programs`` tiles run data-parallel; the tiles of the last, partial wave are each split
    into ``split`` equal runs of K-steps, as many as fit one program each (at most TAIL_MAX_SPLIT, each at
    least TAIL_MIN_STEPS long).  Equal, aligned slices keep the programs of the tail in K lockstep, so the
    rows and columns they share stay in L2 (contiguous equal shares of all K-steps, Stream-K's textbook
    split, put every program at a different K and measured 1.6x slower per K-step on the H100)."""
    remainder = tiles % programs
    if remainder == 0:
        return tiles, 1
    split = min(programs // remainder, k_steps // TAIL_MIN_STEPS, TAIL_MAX_SPLIT)
    return tiles - remainder, max(split, 1)


def smem_bytes(config: GemmConfig, dtype: str) -> int:
    """Shared memory the software pipeline needs: ``stages`` copies of the A and B tiles (both B parts)."""
    element = DTYPE_BYTES[dtype]
    return config.num_stages * (config.block_m + config.tile_n) * config.block_k * element


def accumulator_registers(config: GemmConfig, warp_size: int) -> int:
    """fp32 accumulator registers per thread: the floor of what a tile costs in registers."""
    return math.ceil(config.block_m * config.tile_n / (config.num_warps * warp_size))


def legality(
    config: GemmConfig,
    problem: Problem,
    limits: KernelLimits,
    build: KernelBuild | None = None,
    shape_rules: bool = True,
    require_build: bool = False,
) -> str | None:
    """Why ``config`` cannot (or must not) run ``problem`` on this hardware; None when it can.

    ``build`` is what the compiler produced for this config on this architecture (from the
    profile): when present, its real shared memory, registers and spills decide; otherwise a
    conservative estimate from the tile does.  ``shape_rules=False`` leaves out the rules on the problem's sizes
    (split-K's: K deep enough for the slices, few enough output tiles; the decode family's M <= DECODE_MAX_M), for
    a caller that applies them per shape itself (the model's fast path: one legality mask then serves every size of a
    kind of problem).  ``require_build``: the profile has compiler facts (``Profile.has_builds``), so a config without
    a build for the problem's dtype, layout, load class and output size is illegal; the estimate serves only profiles
    with none.
    """
    if not limits.supports(problem.dtype):
        return f"dtype {problem.dtype} needs a newer architecture than {limits.architecture}"
    if not limits.supports(config.variant):
        return f"variant {config.variant} needs a newer architecture than {limits.architecture}"
    if config.variant == "tma":
        copy_a, copy_b = needs_aligned_copy(problem)
        if not (problem.a_aligned or copy_a) or not (problem.b_aligned or copy_b):
            return "tma needs 16-byte aligned operand rows (and the operand is too small to copy)"
    if problem.dtype.startswith("fp8") and problem.layout != "nt" and config.variant == "tma":
        # fp8 tensor-core dots want K-major B; other layouts go through the persistent kernel only.
        return "fp8 tma path needs layout 'nt' (K-major B)"
    threads = config.num_warps * limits.warp_size
    if threads > limits.max_threads_per_block:
        return f"{threads} threads exceed the {limits.max_threads_per_block} a block may have"
    if (
        shape_rules
        and config.variant == "splitk"
        and config.split_k > 1
        and config.split_k * config.block_k > max(problem.k, 1)
    ):
        return f"split_k={config.split_k} x block_k={config.block_k} exceeds K={problem.k}"
    if shape_rules and problem.m > DECODE_MAX_M and is_decode(config, problem.dtype):
        return f"decode tile {config.block_m}x{config.tile_n} is for M <= {DECODE_MAX_M}, not M={problem.m}"
    if shape_rules and config.variant == "splitk":
        tiles = problem.batch * math.ceil(problem.m / config.block_m) * math.ceil(problem.n / config.block_n)
        if tiles > SPLITK_MAX_WAVES * limits.sm_count:
            # Enough tiles to fill the GPU already: splitting K only adds the fp32 workspace
            # (split_k * tiles * block_m * block_n * 4 bytes) and its reduction.
            return f"split-K needs few output tiles ({tiles} > {SPLITK_MAX_WAVES} x {limits.sm_count} SMs)"
    if build is None and require_build:
        return (
            f"no kernel build for {problem.dtype} layout {problem.layout} ({operand_loads(problem)} loads, "
            f"{problem.output_bytes}-byte output) in the profile"
        )
    if build is not None:
        if build.n_spills > SPILL_MAX_BYTES:
            return f"compiler spills {build.n_spills} bytes of registers"
        shared = build.shared_bytes
    else:
        shared = smem_bytes(config, problem.dtype)
        if accumulator_registers(config, limits.warp_size) > limits.regs_per_thread_max * 3 // 4:
            return "accumulator needs over 3/4 of the registers a thread may have (spill risk)"
    if shared > limits.smem_bytes_per_block:
        return f"needs {shared} B of shared memory, a block may have {limits.smem_bytes_per_block}"
    return None


def partial_vectors_enabled() -> bool:
    """Misaligned operands are read with the widest 4- or 8-byte vectors their rows allow (default);
    ``THEODOLITE_PARTIAL_VEC=0`` reads them element-wise, as the kernels did before (for experiments)."""
    return os.environ.get("THEODOLITE_PARTIAL_VEC", "1") not in ("", "0")


def load_widths(problem: Problem) -> tuple[int, int]:
    """Bytes per load of A and B as gemm() reads them: 16 for aligned (or copied) rows, else the widest
    vector dividing the contiguous extent of a dense operand (up to 8 bytes; gemm() also checks the
    base address and strides of the real tensors), element-wise for both misaligned operands when
    one of them is narrower than an asynchronous copy."""
    copy_a, copy_b = needs_aligned_copy(problem)
    e = DTYPE_BYTES[problem.dtype]
    partial = partial_vectors_enabled()

    def width(aligned: bool, extent: int) -> int:
        if aligned:
            return ALIGN_BYTES
        return min(ALIGN_BYTES // 2, e * (extent & -extent)) if extent > 0 and partial else e

    a_extent = problem.k if problem.layout[0] == "n" else problem.m
    b_extent = problem.n if problem.layout[1] == "n" else problem.k
    return issued_widths(width(problem.a_aligned or copy_a, a_extent), width(problem.b_aligned or copy_b, b_extent), e)


def issued_widths(a: int, b: int, element: int) -> tuple[int, int]:
    """The load widths (bytes) a kernel issues for operands whose rows allow ``a`` and ``b``: when one is
    narrower than an asynchronous copy, the scalar binary runs and every misaligned operand is read
    element-wise (a partial vector beside element-wise loads spilled: 64x32x128 w4 s4 96 B)."""
    if min(a, b) < ASYNC_COPY_MIN_BYTES:
        return (a if a == ALIGN_BYTES else element), (b if b == ALIGN_BYTES else element)
    return a, b


def loads_class(a: float, b: float) -> str:
    """The build class (``KernelBuild.loads``) of a kernel whose operands load ``a`` and ``b`` bytes (as issued).

    Element-wise loads beside a 16-byte vector operand are a binary of their own ("scalar-a": A element-wise,
    "scalar-b": B): one operand pipelined through ``cp.async`` stages, the other through registers, which
    spills where neither form alone does (persistent 128x128x64 w8 s3 flattened: 136 B, H100)."""
    width = min(a, b)
    if width >= ALIGN_BYTES:
        return "vector"
    if width < ASYNC_COPY_MIN_BYTES:
        if max(a, b) >= ALIGN_BYTES:
            return "scalar-a" if a < b else "scalar-b"
        return "scalar"
    return "vec8" if width >= 8 else "vec4"


def operand_loads(problem: Problem) -> str:
    """Which binary gemm() runs, by its narrowest operand loads: "vector" (16 bytes: aligned or copied
    rows), "vec8"/"vec4" (misaligned rows read as 8-/4-byte vectors: pipelined like aligned ones, more
    registers), "scalar" (element-wise: not pipelined), "scalar-a"/"scalar-b" (that operand element-wise, the
    other 16-byte vectors)."""
    return loads_class(*load_widths(problem))


def legal_configs(
    problem: Problem,
    limits: KernelLimits,
    profile: Profile | None = None,
    variants: tuple[str, ...] | None = None,
) -> list[GemmConfig]:
    """The configs of the space that can run ``problem`` here (compiler facts from ``profile`` if given)."""
    result = []
    loads = operand_loads(problem)
    required = profile is not None and profile.has_builds()
    for config in config_space(problem.dtype, variants):
        build = None
        if profile is not None:
            build = problem_build(profile, config, problem, loads)
        if legality(config, problem, limits, build, require_build=required) is None:
            result.append(config)
    return result


def problem_build(profile: Profile, config: GemmConfig, problem: Problem, loads: str) -> KernelBuild | None:
    """The profile's build of ``config`` for a problem's dtype, load class, layout and output size."""
    return lookup_build(profile, config, problem.dtype, loads, problem.layout, problem.output_bytes)


def lookup_build(
    profile: Profile, config: GemmConfig, dtype: str, loads: str, layout: str = "", out_bytes: int = 0
) -> KernelBuild | None:
    """A config's build for (dtype, load class, layout, output bytes); a profile from before a narrower load class
    was gathered serves it with the nearest it has (an operand element-wise beside vectors: the all-element-wise
    build, then the vector one)."""
    build = profile.kernel_build(config.variant, config.key, dtype, loads, layout, out_bytes)
    if build is None and loads.startswith("scalar-") and not profile.has_builds(dtype, loads):
        build = profile.kernel_build(config.variant, config.key, dtype, "scalar", layout, out_bytes)
        loads = "scalar"
    if build is None and loads != "vector" and not profile.has_builds(dtype, loads):
        build = profile.kernel_build(config.variant, config.key, dtype, "vector", layout, out_bytes)
    return build


# An operand whose rows are not 16-byte aligned cannot use vector loads or TMA; gemm() then
# copies it into a buffer with a padded row stride when the copy is read often enough to pay:
# the copy costs one read and one write of the operand, the kernel reads it once per tile
# column (A) or tile row (B) on the other side.
ALIGN_COPY_MIN_REUSE = 128
# Problems below this many FLOPs are never copied (0: off).  The copy is an extra launch (a few us of host
# and GPU time), so tiny problems run uncopied with element-wise loads.  H100 bf16, 2026-11-23, the 118
# random-dev shapes this rule touches, timed uncopied and copied side by side with torch.matmul: best
# config vs torch geomean 0.986 never copying below 2e9 FLOPs, 1.007 with any threshold in [4e8, 1e9],
# 0.906 copying always (``theodolite validate --shapes experiments/align-copy-shapes.csv`` under each
# THEODOLITE_ALIGN_COPY_MIN_FLOPS).
# THEODOLITE_ALIGN_COPY_MIN_FLOPS (read at import) overrides it for side-by-side experiments.
ALIGN_COPY_MIN_FLOPS = float(os.environ.get("THEODOLITE_ALIGN_COPY_MIN_FLOPS", "6e8"))


# A misaligned operand read element-wise is addressed by int32 offsets inside a tile (kernels.epilogue.SCALAR_OFFSETS):
# up to 256 rows (or K-steps) of its row stride.  Rows this long (in elements) or longer would overflow them, so such an
# operand is always copied (gemm() checks its real row stride; the model sees the contiguous extent).
SCALAR_OFFSET_MAX_ROW = 2**31 // 256


def needs_aligned_copy(problem: Problem) -> tuple[bool, bool]:
    """Whether gemm() copies A, B into 16-byte aligned (padded-stride) buffers; the model adds the copy's cost.

    Rule (exactly what gemm() does for contiguous operands): copy an operand iff its rows are misaligned
    (``Problem.a_aligned``/``b_aligned`` false), the problem is not empty, and either the other
    output dimension (N for A, M for B) is at least ``ALIGN_COPY_MIN_REUSE`` (and the problem has at
    least ``ALIGN_COPY_MIN_FLOPS``), or its rows reach ``SCALAR_OFFSET_MAX_ROW`` elements.
    """
    if problem.m == 0 or problem.n == 0 or problem.k == 0 or problem.batch == 0:
        return False, False
    a_long = (problem.k if problem.layout[0] == "n" else problem.m) >= SCALAR_OFFSET_MAX_ROW
    b_long = (problem.n if problem.layout[1] == "n" else problem.k) >= SCALAR_OFFSET_MAX_ROW
    reuse = problem.flops >= ALIGN_COPY_MIN_FLOPS
    copy_a = not problem.a_aligned and (a_long or (reuse and problem.n >= ALIGN_COPY_MIN_REUSE))
    copy_b = not problem.b_aligned and (b_long or (reuse and problem.m >= ALIGN_COPY_MIN_REUSE))
    return copy_a, copy_b


def vector_elements(dtype: str) -> int:
    """Elements per 16-byte vector load for an input dtype."""
    return ALIGN_BYTES // DTYPE_BYTES[dtype]


def estimated_registers(config: GemmConfig, warp_size: int = 32) -> int:
    """A rough per-thread register estimate (accumulator plus addressing and operand fragments)."""
    return min(255, accumulator_registers(config, warp_size) + 64)


# split-K tiles of at most this many rows mask the rows/columns past the edge instead of loading wrapped duplicates
# (experiments/edge_mask.py; H100: 16x64 split-K on ragged N 1.2-1.5x faster, while
# the mask's per-element predicates cost large persistent tiles up to 3x, so the others keep wrapping)
MASKED_EDGE_MAX_BLOCK_M = 32
# THEODOLITE_MASKED_EDGES (read at import) overrides the rule for side-by-side experiments: "all", "none", or
# "config" (the per-config rule alone: no dimension masked for being shorter than its tile)
MASKED_EDGES = os.environ.get("THEODOLITE_MASKED_EDGES", "rule")
# bits of the kernels' EDGE_MASK: rows of A / columns of B past the edge are masked (not loaded)
EDGE_ROWS = 1
EDGE_COLUMNS = 2


def masked_edges(config: GemmConfig) -> int:
    """The edge mask a config's kernel is built with for every shape (``EDGE_MASK`` bits of
    ``epilogue.mma_tile``; TMA loads have their own bounds): rows and columns for split-K's small tiles."""
    if MASKED_EDGES in ("all", "none"):
        return EDGE_ROWS | EDGE_COLUMNS if MASKED_EDGES == "all" else 0
    small_splitk = config.variant == "splitk" and config.block_m <= MASKED_EDGE_MAX_BLOCK_M
    return EDGE_ROWS | EDGE_COLUMNS if small_splitk else 0


def edge_mask(config: GemmConfig, m: int, n: int) -> int:
    """The edge mask of one launch: the config's, plus rows when M is shorter than the tile and columns when N
    is.  Wrapped, a tile of BLOCK_M rows on M < BLOCK_M reads its M rows BLOCK_M / M times per K-step in every
    tile, the same few L2 lines from every SM: persistent/128x32x64 on 2x7487x184 takes 37.7 us wrapped and 7.1
    masked, 16x64x128 on 1x8072x3264 28.6 and 21.1 (H100, experiments/hot_rows.py)."""
    mask = masked_edges(config)
    if MASKED_EDGES == "rule":
        mask |= (EDGE_ROWS if m < config.block_m else 0) | (EDGE_COLUMNS if n < config.block_n else 0)
    return mask


def programs_per_sm(config: GemmConfig, dtype: str, limits: KernelLimits) -> int:
    """How many programs of a persistent kernel gemm() launches per SM (grid = sm_count * this).

    From shared memory, threads and an estimate of registers, capped at 4; persistent
    variants (persistent, streamk, tma) launch ``min(tiles, sm_count * programs_per_sm)``.
    """
    threads = config.num_warps * limits.warp_size
    smem_sm = limits.smem_bytes_per_sm or limits.smem_bytes_per_block
    by_smem = smem_sm // max(1, smem_bytes(config, dtype) + 1024)
    by_threads = limits.max_threads_per_sm // threads
    by_regs = limits.regs_per_sm // (threads * estimated_registers(config, limits.warp_size))
    return max(1, min(4, by_smem, by_threads, by_regs))
