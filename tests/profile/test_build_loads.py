"""Kernel builds per load kind: the binary of misaligned (scalar-load) operands has its own resources."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import h5py
from theodolite.kernels.config import GemmConfig, KernelLimits, Problem, legal_configs, legality, operand_loads

from theodolite.profile import KernelBuild, Profile, load_profile, save_profile

KEY = "persistent/128x128x128/g8/w8/s3/k1/f"


def _with_builds(profile: Profile) -> Profile:
    builds = (
        KernelBuild("persistent", KEY, "bf16", "sm_90", 230, 0, 196608, 3),
        KernelBuild("persistent", KEY, "bf16", "sm_90", 255, 408, 65536, 3, loads="scalar"),
    )
    return replace(profile, kernel_builds=builds)


def test_scalar_builds_round_trip_and_old_files_read_as_vector(measured_profile: Profile, tmp_path: Path) -> None:
    profile = _with_builds(measured_profile)
    loaded = load_profile(save_profile(profile, tmp_path / "p.h5"))
    assert loaded.kernel_build("persistent", KEY, "bf16").n_spills == 0
    assert loaded.kernel_build("persistent", KEY, "bf16", "scalar").n_spills == 408
    assert loaded.fingerprint == profile.fingerprint
    # a file written before the loads column existed (vector builds only) still loads, fingerprint intact
    vector_only = replace(profile, kernel_builds=profile.kernel_builds[:1])
    path = save_profile(vector_only, tmp_path / "old.h5")
    with h5py.File(path, "r+") as file:
        del file["kernel_builds"]["loads"]
    old = load_profile(path)
    assert [b.loads for b in old.kernel_builds] == ["vector"] and old.fingerprint == vector_only.fingerprint


def test_misaligned_problem_is_judged_by_its_scalar_build(measured_profile: Profile) -> None:
    profile = _with_builds(measured_profile)
    limits = KernelLimits.from_profile(profile)
    config = GemmConfig.from_key(KEY)
    aligned = Problem(4096, 4096, 4096)
    misaligned = Problem(300, 300, 583)  # K rows of 583 bf16: not 16-byte aligned, too small to copy
    assert operand_loads(aligned) == "vector" and operand_loads(misaligned) == "scalar"
    assert config in legal_configs(aligned, limits, profile)
    assert config not in legal_configs(misaligned, limits, profile)
    assert "spills" in (legality(config, misaligned, limits, profile.kernel_build("persistent", KEY, "bf16", "scalar")))


def test_partial_vector_problems_are_judged_by_their_width_build(measured_profile: Profile, tmp_path: Path) -> None:
    """Misaligned rows read as 4-byte vectors have their own binary (more addresses: it spills first); a
    profile without that build falls back to the vector one; an unknown load kind is a corrupt profile."""
    import pytest

    from theodolite.errors import ProfileError
    from theodolite.profile.schema import validate

    vec4 = KernelBuild("persistent", KEY, "bf16", "sm_90", 255, 96, 98304, 3, loads="vec4")
    profile = replace(measured_profile, kernel_builds=(*_with_builds(measured_profile).kernel_builds, vec4))
    limits = KernelLimits.from_profile(profile)
    config = GemmConfig.from_key(KEY)
    partial = Problem(300, 300, 582)  # K rows of 582 bf16: 4-byte vectors; N rows of 300: 8-byte ones
    assert operand_loads(partial) == "vec4" and operand_loads(Problem(300, 300, 580)) == "vec8"
    assert config not in legal_configs(partial, limits, profile)
    assert config in legal_configs(Problem(300, 300, 580), limits, profile)  # no vec8 build: the vector one
    loaded = load_profile(save_profile(profile, tmp_path / "p.h5"))
    assert loaded.kernel_build("persistent", KEY, "bf16", "vec4").n_spills == 96
    with pytest.raises(ProfileError, match="unknown loads 'vec3'"):
        validate(replace(profile, kernel_builds=(replace(vec4, loads="vec3"),)))


def test_element_wise_beside_vectors_is_judged_by_its_own_build(measured_profile: Profile) -> None:
    """A operand in 16-byte vectors beside element-wise B runs a binary of its own (one operand in cp.async
    stages, the other through registers: it spills where the all-element-wise one does not); a profile
    without that build falls back to the all-element-wise one, not to the vector one."""
    from theodolite.model.predict import ConfigTable

    mixed = Problem(64, 129, 144)  # K rows of 144 bf16: 16 bytes; N rows of 129: element-wise
    assert operand_loads(mixed) == "scalar-b"
    limits = KernelLimits.from_profile(measured_profile)
    config = GemmConfig.from_key(KEY)
    clean = KernelBuild("persistent", KEY, "bf16", "sm_90", 230, 0, 196608, 3)
    scalar = KernelBuild("persistent", KEY, "bf16", "sm_90", 255, 0, 65536, 3, loads="scalar")
    spilling = replace(scalar, loads="scalar-b", n_spills=136)
    without = replace(measured_profile, kernel_builds=(clean, scalar))
    assert config in legal_configs(mixed, limits, without)
    with_mixed = replace(measured_profile, kernel_builds=(clean, scalar, spilling))
    assert config not in legal_configs(mixed, limits, with_mixed)
    assert config in legal_configs(Problem(64, 129, 146), limits, with_mixed)  # both element-wise: "scalar"
    table = ConfigTable(with_mixed, "bf16")
    index = table.index[KEY]
    assert not table.legal_mask(mixed)[index]
    no_scalar = replace(measured_profile, kernel_builds=(clean, replace(clean, loads="scalar", n_spills=8)))
    assert ConfigTable(no_scalar, "bf16").builds_by_loads["scalar-a"][index].n_spills == 8


def test_residency_is_read_from_the_binary_that_runs() -> None:
    """Programs per SM come from the load class's build: split-K 64x64x128 k2 keeps 4 stages in its vector build
    (one program per SM by shared memory) but one stage beside element-wise B (two fit), so a problem of that class
    runs two per SM in the model, and one of the vector class one."""
    from theodolite.kernels.config import Problem
    from theodolite.model.predict import predict, table_for

    profile = load_profile(Path(__file__).resolve().parents[2] / "profiles" / "nvidia-h100-80gb-hbm3.h5")
    config = GemmConfig.from_key("splitk/64x64x128/g8/w4/s4/k2")
    table = table_for(profile, "bf16")
    i = table.index[config.key]
    assert table.for_loads("vector").fit[i] == 1 and table.for_loads("scalar-b").fit[i] == 2
    mixed, aligned = Problem(640, 639, 512), Problem(640, 640, 512)  # 100 tiles, 200 K-slices either way
    assert operand_loads(mixed) == "scalar-b" and operand_loads(aligned) == "vector"
    assert predict(mixed, config, profile).details["concurrent"] == 200
    assert predict(aligned, config, profile).details["concurrent"] == 132


def test_a_layout_with_its_own_build_is_judged_by_it(measured_profile: Profile) -> None:
    """nt (nn.Linear's x @ W.t()) has builds of its own: a K-major B changes the binary.  An nt problem reads the nt
    build, other layouts the layout-agnostic one; a build spilling a few bytes stays legal, one spilling more does
    not (``SPILL_MAX_BYTES``)."""
    from theodolite.kernels.build import BUILD_MATRIX
    from theodolite.kernels.config import SPILL_MAX_BYTES
    from theodolite.model.predict import ConfigTable

    assert all("nt" in BUILD_MATRIX[dtype][0] for dtype in ("bf16", "fp16", "tf32", "fp32"))
    key = "persistent/32x64x128/g8/w4/s4/k1"
    agnostic = KernelBuild("persistent", key, "bf16", "sm_90", 255, 0, 40960, 4, loads="scalar-b")
    nt = replace(agnostic, layout="nt", out_bytes=2, n_spills=120)
    profile = replace(measured_profile, kernel_builds=(agnostic, nt))
    assert profile.kernel_build("persistent", key, "bf16", "scalar-b", "nt") is nt
    assert profile.kernel_build("persistent", key, "bf16", "scalar-b", "nn") is agnostic
    assert profile.kernel_build("persistent", key, "bf16", "scalar-b", "tn") is agnostic
    limits = KernelLimits.from_profile(profile)
    config = GemmConfig.from_key(key)
    # 2 rows against W[45184, 13713]: K rows of 13713 bf16 misaligned, B element-wise, A tiny (copied aligned)
    decode_nt = Problem(2, 45184, 13713, layout="nt")
    # nn with B's rows (N = 45183) misaligned: element-wise B again, judged by the layout-agnostic build
    decode_nn = Problem(2, 45183, 13712, layout="nn")
    assert operand_loads(decode_nt) == "scalar-b"
    assert config not in legal_configs(decode_nt, limits, profile)
    table = ConfigTable(profile, "bf16")
    assert not table.legal_mask(decode_nt)[table.index[key]]
    small = replace(profile, kernel_builds=(agnostic, replace(nt, n_spills=SPILL_MAX_BYTES)))
    assert config in legal_configs(decode_nt, limits, small)
    assert operand_loads(decode_nn) == "scalar-b"
    assert config in legal_configs(decode_nn, limits, profile)
