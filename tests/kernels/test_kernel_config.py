"""CPU tests of the pure-Python config space and legality (kernels/config.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st
from theodolite.kernels.config import (
    ALIGN_COPY_MIN_REUSE,
    DTYPE_BYTES,
    VARIANTS,
    ConfigError,
    GemmConfig,
    KernelLimits,
    Problem,
    config_space,
    legal_configs,
    legality,
    load_widths,
    needs_aligned_copy,
    operand_loads,
    programs_per_sm,
    smem_bytes,
    streamk_partition,
)

H100 = KernelLimits("sm_90", 227 * 1024, 65536, 255, 1024, 32, 132, 228 * 1024, 2048)
AMPERE = KernelLimits("sm_80", 163 * 1024, 65536, 255, 1024, 32, 108)


def test_config_import_is_light() -> None:
    code = (
        "import sys, theodolite.kernels.config, theodolite.kernels; "
        "print('torch' in sys.modules, 'triton' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"]


@pytest.mark.parametrize("dtype", sorted(DTYPE_BYTES))
def test_space_keys_round_trip_and_are_unique(dtype: str) -> None:
    space = config_space(dtype)
    keys = [c.key for c in space]
    assert len(keys) == len(set(keys))
    assert all(GemmConfig.from_key(k) == c for k, c in zip(keys, space, strict=True))
    assert {c.variant for c in space} == set(VARIANTS)


def test_space_is_deterministic_and_ordered_by_variant() -> None:
    assert config_space("bf16") == config_space("bf16")
    # short-K entries (K under ~100): 16- and 32-deep K-steps, persistent, 2 stages
    short = {c.key for c in config_space("bf16") if c.block_k < 64}
    assert short == {"persistent/16x64x32/g8/w4/s2/k1", "persistent/16x64x16/g8/w4/s2/k1",
                     "persistent/64x64x32/g8/w4/s2/k1", "persistent/64x64x16/g8/w4/s2/k1",
                     "persistent/128x64x16/g8/w4/s2/k1", "persistent/256x128x16/g8/w8/s2/k1"}  # fmt: skip
    assert config_space("bf16", ("splitk",)) == tuple(c for c in config_space("bf16") if c.variant == "splitk")
    with pytest.raises(ConfigError):
        config_space("int8")
    with pytest.raises(ConfigError):
        config_space("bf16", ("nope",))


@given(
    variant=st.sampled_from(VARIANTS),
    bm=st.sampled_from([16, 32, 64, 128, 256]),
    bn=st.sampled_from([16, 32, 64, 128, 256]),
    bk=st.sampled_from([16, 32, 64, 128]),
    group=st.integers(1, 16),
    warps=st.sampled_from([1, 2, 4, 8]),
    stages=st.integers(1, 6),
    split=st.integers(1, 32),
    flatten=st.booleans(),
)
def test_key_round_trip_property(
    variant: str, bm: int, bn: int, bk: int, group: int, warps: int, stages: int, split: int, flatten: bool
) -> None:
    if variant != "splitk":
        split = 1
    flatten = flatten and variant in ("persistent", "tma")
    config = GemmConfig(variant, bm, bn, bk, group, warps, stages, split, flatten=flatten)
    assert GemmConfig.from_key(config.key) == config
    assert config.key.endswith("/f") == flatten


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(variant="bogus", block_m=64, block_n=64, block_k=32),
        dict(variant="persistent", block_m=48, block_n=64, block_k=32),
        dict(variant="persistent", block_m=64, block_n=64, block_k=32, split_k=2),
        dict(variant="persistent", block_m=0, block_n=64, block_k=32),
        dict(variant="streamk", block_m=64, block_n=64, block_k=32, flatten=True),  # only persistent/tma flatten
        dict(variant="persistent", block_m=64, block_n=64, block_k=32, flatten=1),
    ],
)
def test_bad_configs_raise(kwargs: dict) -> None:
    with pytest.raises(ConfigError):
        GemmConfig(**kwargs)


def test_composite_tiles_are_tma_powers_of_two_not_flattened() -> None:
    config = GemmConfig("tma", 128, 128, 64, 8, 8, 5, block_n1=32)
    assert config.key == "tma/128x128+32x64/g8/w8/s5/k1" and config.tile_n == 160
    assert GemmConfig.from_key(config.key) == config
    for bad in (dict(block_n1=48), dict(block_n1=8), dict(block_n1=256), dict(block_n1=32, flatten=True)):
        with pytest.raises(ConfigError, match="block_n1|composite"):
            GemmConfig("tma", 128, 128, 64, 8, 8, 5, **bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="composite"):
        GemmConfig("persistent", 128, 128, 64, block_n1=32)
    composite = [c for c in config_space("bf16") if c.block_n1]
    assert composite and all(c.variant == "tma" and not c.flatten for c in composite)


@pytest.mark.parametrize(
    "key",
    [
        "persistent/128x128",
        "persistent/128x128x64/g8/w8/s3/k1/x",
        "persistent/128x128x64/g8/w8/s3/k1/f/f",
        "tma/128x128+x64/g8/w8/s5/k1",  # a composite tile without its second width
        "tma/128x+32x64/g8/w8/s5/k1",
    ],
)
def test_bad_key_raises(key: str) -> None:
    with pytest.raises(ConfigError, match="not a config key"):
        GemmConfig.from_key(key)


def test_only_persistent_and_tma_entries_flatten() -> None:
    flat = [c for c in config_space("bf16") if c.flatten]
    assert flat and {c.variant for c in flat} == {"persistent", "tma"}
    assert GemmConfig.from_key("persistent/128x128x64/g8/w8/s3/k1").flatten is False  # keys of older results


def test_problem_validation() -> None:
    with pytest.raises(ConfigError):
        Problem(-1, 2, 3)
    with pytest.raises(ConfigError):
        Problem(1, 2, 3, dtype="int8")
    with pytest.raises(ConfigError):
        Problem(1, 2, 3, layout="xx")
    assert Problem(2, 3, 4, dtype="tf32").output_dtype == "fp32"
    assert Problem(2, 3, 4).flops == 2 * 2 * 3 * 4


def test_alignment_and_copy_rule() -> None:
    aligned = Problem(3000, 1504, 7000)
    assert aligned.a_aligned and aligned.b_aligned
    assert needs_aligned_copy(aligned) == (False, False)
    odd = Problem(3000, 1500, 7000)  # B rows of 1500 bf16 = 3000 bytes: misaligned
    assert odd.a_aligned and not odd.b_aligned
    assert needs_aligned_copy(odd) == (False, True)
    small_m = Problem(ALIGN_COPY_MIN_REUSE - 1, 1500, 7000)
    assert needs_aligned_copy(small_m) == (False, False)
    assert needs_aligned_copy(Problem(0, 1500, 7000)) == (False, False)
    # layout decides which dimension is the row: A stored transposed has rows of M elements.
    assert not Problem(1001, 512, 512, layout="tn").a_aligned
    assert Problem(1001, 512, 512, layout="nn").a_aligned


def test_load_widths_of_misaligned_rows() -> None:
    """Misaligned (uncopied) rows still get the widest 4- or 8-byte vector their length allows; only
    narrower (element-wise) loads make gemm() run the scalar binary."""
    assert load_widths(Problem(64, 64, 64)) == (16, 16)
    assert load_widths(Problem(64, 36, 146)) == (4, 8)  # 146 = 2 x 73 bf16 rows: 4 bytes; 36 = 4 x 9: 8
    assert load_widths(Problem(64, 129, 2317)) == (2, 2)
    assert load_widths(Problem(64, 36, 146, layout="tn")) == (16, 8)  # A stored transposed: rows of M = 64
    assert load_widths(Problem(64, 36, 146, dtype="tf32")) == (8, 16)
    assert load_widths(Problem(64, 36, 146, dtype="fp8e4m3")) == (1, 1)  # 2-byte A: both element-wise
    assert load_widths(Problem(64, 129, 144)) == (16, 2)
    assert load_widths(Problem(3000, 1500, 7000)) == (16, 16)  # B (8-byte rows) is copied at this size
    assert operand_loads(Problem(64, 36, 146)) == "vec4"  # the narrowest operand names the binary
    assert operand_loads(Problem(64, 36, 148)) == "vec8"
    assert operand_loads(Problem(64, 32, 144)) == "vector"
    assert operand_loads(Problem(64, 129, 146)) == "scalar"
    assert operand_loads(Problem(64, 36, 146, dtype="fp8e4m3")) == "scalar"
    # element-wise beside 16-byte vectors: a binary of its own, named by the element-wise operand
    assert operand_loads(Problem(64, 129, 144)) == "scalar-b"
    assert operand_loads(Problem(64, 128, 145)) == "scalar-a"
    assert operand_loads(Problem(64, 129, 146, layout="tn")) == "scalar-b"  # A's rows of M = 64: vectors


def test_legality_rules() -> None:
    problem = Problem(4096, 4096, 4096)
    tma = GemmConfig("tma", 128, 128, 64, 8, 8, 3)
    assert legality(tma, problem, H100) is None
    assert "newer architecture" in legality(tma, problem, AMPERE)
    assert "aligned" in legality(tma, Problem(64, 60, 4090), H100)
    assert legality(tma, Problem(3000, 1500, 7000), H100) is None  # B is copied
    split = GemmConfig("splitk", 64, 64, 128, 8, 4, 3, 16)
    assert "exceeds K" in legality(split, Problem(64, 64, 1024), H100)
    huge = GemmConfig("persistent", 256, 256, 128, 8, 8, 5)
    assert "shared memory" in legality(huge, problem, H100) or "registers" in legality(huge, problem, H100)
    fp8 = Problem(1024, 1024, 1024, dtype="fp8e4m3")
    assert "newer architecture" in legality(GemmConfig("persistent", 64, 64, 64), fp8, AMPERE)


def test_legal_configs_subset_and_smem() -> None:
    problem = Problem(512, 512, 512)
    legal = legal_configs(problem, H100)
    assert legal and set(legal) <= set(config_space("bf16"))
    assert all(smem_bytes(c, "bf16") <= H100.smem_bytes_per_block for c in legal)
    assert all(1 <= programs_per_sm(c, "bf16", H100) <= 4 for c in legal)


@pytest.mark.parametrize(
    ("tiles", "programs", "k_steps", "expected"),
    [
        (150, 132, 66, (132, 7)),  # 768x3200 in 128x128 tiles: a wave, then 18 tiles in 132 // 18 = 7 slices
        (35, 132, 160, (0, 3)),  # 640x896x10240: 35 tiles, 3 slices each fit one wave
        (264, 132, 64, (264, 1)),  # whole waves: nothing to split
        (7, 396, 141, (0, 8)),  # 419x40x9016 in 64x64 tiles: at most 8 slices
        (5, 132, 8, (0, 2)),  # each slice at least 4 K-steps
        (5, 132, 3, (0, 1)),  # too short to split at all
        (1, 1, 100, (1, 1)),  # one program: one full wave
    ],
)
def test_streamk_partition(tiles: int, programs: int, k_steps: int, expected: tuple[int, int]) -> None:
    dp_tiles, split = streamk_partition(tiles, programs, k_steps)
    assert (dp_tiles, split) == expected
    assert dp_tiles % programs == 0 and (tiles - dp_tiles) * split <= programs


def test_cooperative_reduction_rule() -> None:
    """Split-K reduces cooperatively only where it pays and cannot starve: at least COOP_MIN_SPLIT slices holding at
    least COOP_MIN_PARTIAL_BYTES of fp32 partials per tile, and the whole grid one program per SM or fewer."""
    from theodolite.kernels.config import GemmConfig, cooperative_reduction

    deep = GemmConfig.from_key("splitk/64x64x128/g8/w4/s4/k8")  # 8 x 16 KB of partials per tile
    assert cooperative_reduction(deep, 16, 132)  # 128 programs
    assert not cooperative_reduction(deep, 17, 132)  # 136 programs: more than one per SM
    assert not cooperative_reduction(GemmConfig.from_key("splitk/64x64x128/g8/w4/s4/k4"), 16, 132)  # 64 KB
    assert not cooperative_reduction(GemmConfig.from_key("splitk/16x64x128/g8/w4/s4/k8"), 4, 132)  # 32 KB
    assert cooperative_reduction(GemmConfig.from_key("splitk/16x64x128/g8/w4/s4/k32"), 4, 132)  # 128 KB
    assert not cooperative_reduction(GemmConfig.from_key("splitk/128x128x64/g8/w8/s3/k2"), 8, 132)  # two slices
    assert not cooperative_reduction(GemmConfig.from_key("persistent/64x64x128/g8/w4/s4/k1"), 1, 132)
