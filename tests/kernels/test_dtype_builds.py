"""Every advertised dtype: builds per layout and output size, no pick without a build, the launch fallback, the
fp8 API's checks and the decode/wide suites (CPU: bundled profiles, synthetic builds, a faked launcher)."""

from __future__ import annotations

import warnings
from dataclasses import replace
from pathlib import Path

import h5py
import pytest
import torch
from theodolite.kernels import shapes
from theodolite.kernels.build import BUILD_MATRIX
from theodolite.kernels.config import (
    DTYPE_BYTES,
    ConfigError,
    GemmConfig,
    KernelLimits,
    Problem,
    config_space,
    legal_configs,
    legality,
    lookup_build,
    operand_loads,
)
from theodolite.model import fast
from theodolite.model.predict import MissingBuildsError, clear_tables

from theodolite import api
from theodolite.errors import ProfileError
from theodolite.profile import KernelBuild, Profile, load_profile, save_profile

PROFILES = Path(__file__).resolve().parents[2] / "profiles"
BUNDLED = ("nvidia-h100-80gb-hbm3.h5", "nvidia-h200.h5")


def _suite_problems() -> list[tuple[int, int, int, str | None]]:
    # every fourth llm layer (all of its weights and token counts in turn), misaligned random-dev shapes, wide ones
    rows = (
        shapes.load_suite_rows("llm")[::4]
        + shapes.load_suite_rows("random-dev")[:16]
        + shapes.load_suite_rows("wide:16:7")
    )
    return [(int(r["M"]), int(r["N"]), int(r["K"]), r.get("layout")) for r in rows]


@pytest.mark.parametrize(
    ("name", "dtype"),
    [(BUNDLED[0], dtype) for dtype in DTYPE_BYTES] + [(BUNDLED[1], "bf16"), (BUNDLED[1], "fp8e4m3")],
)
def test_bundled_picks_have_a_legal_build_or_the_profile_says_which_builds_are_missing(
    name: str, dtype: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the H100's bf16 picks through the candidate grids; the rest through the full space, whose legal mask is the one
    # the grids' candidates are filtered by (choose_fast.best_of): the same rule, without building ~8 grids a case
    if (name, dtype) != (BUNDLED[0], "bf16"):
        monkeypatch.setattr(fast, "BUILD_AFTER", 1 << 30)
    profile = load_profile(PROFILES / name)
    limits = KernelLimits.from_profile(profile)
    for m, n, k, suite_layout in _suite_problems():
        for layout in (suite_layout,) if suite_layout else ("nn", "nt"):
            problem = Problem(m, n, k, dtype=dtype, layout=layout)
            try:
                selection = api.select(m, n, k, dtype=dtype, layout=layout, profile=profile)
            except MissingBuildsError as error:
                assert not profile.has_builds(dtype) or not any(
                    b.dtype == dtype and b.layout in ("", layout) for b in profile.kernel_builds
                )
                if layout in BUILD_MATRIX[dtype][0] or "" in BUILD_MATRIX[dtype][0]:  # a refresh would build it
                    assert f"python -m theodolite.probes.builds {profile.origin} --dtypes {dtype}" in str(error)
                else:  # a layout the matrix does not build (fp8 with N-major B: matmul copies B K-major first)
                    assert "is not built" in str(error) and "BUILD_MATRIX" in str(error)
                break
            config = selection.config
            build = lookup_build(profile, config, dtype, operand_loads(problem), layout, problem.output_bytes)
            assert build is not None, f"{m}x{n}x{k} {dtype} {layout}: {config.key} has no build"
            assert legality(config, problem, limits, build, require_build=True) is None
    clear_tables()  # the candidate grids of every class this suite touched: bound the test process's memory


def _profile_with(profile: Profile, builds: tuple[KernelBuild, ...]) -> Profile:
    return replace(profile, kernel_builds=builds)


def test_a_profile_with_builds_refuses_configs_without_one_and_a_datasheet_profile_estimates() -> None:
    measured = load_profile(PROFILES / BUNDLED[0])
    limits = KernelLimits.from_profile(measured)
    problem = Problem(4096, 4096, 4096, dtype="bf16", layout="nt")
    everything = legal_configs(problem, limits, measured)
    kept = everything[0]
    only = tuple(b for b in measured.kernel_builds if b.config_key == kept.key and b.dtype == "bf16")
    assert [c.key for c in legal_configs(problem, limits, _profile_with(measured, only))] == [kept.key]
    # no builds at all: the estimate judges, so configs beyond the one build stay legal
    assert len(legal_configs(problem, limits, _profile_with(measured, ()))) > 1


def test_layout_and_output_size_pick_their_own_build() -> None:
    base = load_profile(PROFILES / BUNDLED[0])
    key = "tma/128x256x128/g8/w8/s4/k1/f"
    builds = (
        KernelBuild("tma", key, "fp8e4m3", "sm_90", 162, 0, 327712, 4, layout="nt", out_bytes=4),
        KernelBuild("tma", key, "fp8e4m3", "sm_90", 162, 0, 229408, 4, layout="nt", out_bytes=2),
    )
    profile = _profile_with(base, builds)
    limits = KernelLimits.from_profile(profile)
    config = GemmConfig.from_key(key)
    wide = Problem(8192, 8192, 8192, dtype="fp8e4m3", layout="nt", out_dtype="fp32")
    narrow = Problem(8192, 8192, 8192, dtype="fp8e4m3", layout="nt")  # bf16 output by default
    assert narrow.output_dtype == "bf16"
    over = legality(config, wide, limits, lookup_build(profile, config, "fp8e4m3", "vector", "nt", 4), True, True)
    assert over is not None and "327712" in over
    assert legality(config, narrow, limits, lookup_build(profile, config, "fp8e4m3", "vector", "nt", 2)) is None
    # a config with no build here (persistent, or tma in layout tn): illegal, not estimated
    persistent = config_space("fp8e4m3", ("persistent",))[0]
    assert lookup_build(profile, persistent, "fp8e4m3", "vector", "nt", 2) is None
    reason = legality(persistent, narrow, limits, None, require_build=True)
    assert reason is not None and "no kernel build" in reason
    assert legality(persistent, narrow, limits, None) is None  # the estimate (profiles without builds) lets it by


def test_layout_and_output_columns_round_trip_and_old_files_serve_every_layout(tmp_path: Path) -> None:
    base = load_profile(PROFILES / BUNDLED[0])
    key = config_space("bf16")[0].key
    fresh = KernelBuild("tma", key, "bf16", "sm_90", 200, 0, 180000, 3, layout="nt", out_bytes=4)
    profile = _profile_with(base, (fresh,))
    loaded = load_profile(save_profile(profile, tmp_path / "p.h5"))
    assert loaded.kernel_build("tma", key, "bf16", "vector", "nt", 4) == fresh
    assert loaded.kernel_build("tma", key, "bf16", "vector", "nn", 4) is None
    assert loaded.fingerprint == profile.fingerprint
    old = _profile_with(base, (replace(fresh, layout="", out_bytes=0),))
    path = save_profile(old, tmp_path / "old.h5")
    with h5py.File(path, "r+") as file:
        del file["kernel_builds"]["layout"], file["kernel_builds"]["out_bytes"]
    legacy = load_profile(path)
    assert legacy.fingerprint == old.fingerprint
    assert legacy.kernel_build("tma", key, "bf16", "vector", "tt", 2) is not None  # every layout, default output
    assert legacy.kernel_build("tma", key, "bf16", "vector", "nn", 4) is None  # not a wider output


def test_missing_builds_error_is_a_profile_error_naming_the_refresh() -> None:
    profile = load_profile(PROFILES / BUNDLED[0])
    stripped = _profile_with(profile, tuple(b for b in profile.kernel_builds if b.dtype != "fp16"))
    with pytest.raises(ProfileError, match="probes.builds .* --dtypes fp16"):
        api.select(512, 512, 512, dtype="fp16", profile=stripped)


class _FakeKernels:
    """theodolite.kernels with a launcher whose first configs fail the way Triton's would."""

    def __init__(self, failing: int) -> None:
        import theodolite.kernels as real

        self.real = real
        self.failing = failing
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> object:
        return getattr(self.real, name)

    def gemm(self, a: torch.Tensor, b: torch.Tensor, config: GemmConfig, **kwargs: object) -> torch.Tensor:
        self.calls.append(config.key)
        if len(self.calls) <= self.failing:
            raise self.real.KernelLaunchError(f"{config.key}: out of resource: shared memory")
        return torch.zeros(a.shape[0], b.shape[1])


def test_matmul_falls_back_to_the_next_legal_config_and_warns_once(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    profile = load_profile(PROFILES / BUNDLED[0])
    fake = _FakeKernels(failing=2)
    real_import = importlib.import_module
    monkeypatch.setattr(
        importlib, "import_module", lambda name: fake if name == "theodolite.kernels" else real_import(name)
    )
    api.clear_caches()
    a, b = torch.zeros(1000, 3000, dtype=torch.bfloat16), torch.zeros(3000, 2000, dtype=torch.bfloat16)
    from theodolite.kernels.launch import problem_of

    ranked = [p.config.key for p in api.rank(problem_of(a, b), profile)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = api.matmul(a, b, profile=profile)
        again = api.matmul(a, b, profile=profile)
    assert out.shape == (1000, 2000) and again.shape == (1000, 2000)
    assert len(fake.calls) == 4 and len(set(fake.calls[:3])) == 3 and fake.calls[3] == fake.calls[2]
    assert fake.calls[0] == api.select(1000, 2000, 3000, profile=profile).config.key
    fallbacks = [w for w in caught if issubclass(w.category, api.KernelFallbackWarning)]
    assert len(fallbacks) == 1 and fake.calls[0] in str(fallbacks[0].message)
    expected = [key for key in ranked if key != fake.calls[0]][:2]  # the model's ranking, the failed pick skipped
    assert fake.calls[1:3] == expected
    api.clear_caches()


def test_matmul_reraises_errors_that_are_not_launch_failures(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    class Broken(_FakeKernels):
        def gemm(self, a: torch.Tensor, b: torch.Tensor, config: GemmConfig, **kwargs: object) -> torch.Tensor:
            raise ConfigError("out has shape (1, 1), expected (8, 8)")

    fake = Broken(0)
    real_import = importlib.import_module
    monkeypatch.setattr(
        importlib, "import_module", lambda name: fake if name == "theodolite.kernels" else real_import(name)
    )
    api.clear_caches()
    with pytest.raises(ConfigError, match="out has shape"):
        api.matmul(torch.zeros(8, 8, dtype=torch.bfloat16), torch.zeros(8, 8, dtype=torch.bfloat16),
                   profile=PROFILES / BUNDLED[0])  # fmt: skip
    api.clear_caches()


def test_fp8_scale_and_output_checks() -> None:
    from theodolite.kernels.launch import _scale_tensor

    cpu = torch.device("cpu")
    with pytest.raises(ConfigError, match="per-tensor"):
        _scale_tensor(torch.ones(2), None, cpu)
    with pytest.raises(ConfigError, match="floating-point"):
        _scale_tensor(torch.ones(1, dtype=torch.int32), None, cpu)
    with pytest.raises(ConfigError, match="float or a tensor"):
        _scale_tensor("2", None, cpu)
    two, three = torch.tensor(2.0), torch.tensor([3.0], dtype=torch.float64)
    assert _scale_tensor(two, three, cpu).item() == 6.0 and _scale_tensor(None, 0.5, cpu).item() == 0.5
    assert _scale_tensor(None, None, cpu) is None
    with pytest.raises(ConfigError, match="fp8 inputs only"):
        api.matmul(torch.zeros(8, 8, dtype=torch.bfloat16), torch.zeros(8, 8, dtype=torch.bfloat16),
                   scale_a=two, profile=PROFILES / BUNDLED[0])  # fmt: skip
    with pytest.raises(ConfigError, match="output dtype"):
        api.matmul(torch.zeros(8, 8, dtype=torch.float8_e4m3fn), torch.zeros(8, 8, dtype=torch.float8_e4m3fn),
                   out_dtype=torch.int8, profile=PROFILES / BUNDLED[0])  # fmt: skip


def test_fp8_with_n_major_b_copies_it_k_major_and_the_model_prices_the_copy() -> None:
    base = load_profile(PROFILES / BUNDLED[0])
    # the bf16 builds relabelled fp8 (the same bytes per K-step): the decision under test is the plan, not resources
    relabel = {c.key for c in config_space("fp8e4m3")}
    builds = []
    for b in base.kernel_builds:
        config = GemmConfig.from_key(b.config_key)
        twin = replace(config, block_k=config.block_k * 2)
        if b.dtype == "bf16" and twin.key in relabel:
            builds.append(replace(b, config_key=twin.key, dtype="fp8e4m3"))
    profile = _profile_with(base, tuple(builds))
    problem = Problem(8192, 8192, 8192, dtype="fp8e4m3", layout="nn")
    config, copied = api._plan(problem, profile)
    assert copied and config == api.select_problem(api._k_major_copy(problem), profile).config
    assert api._k_major_copy(problem).layout == "nt" and config.variant in ("tma", "persistent")
    hbm = profile.value("hbm_copy_bandwidth")
    assert api.copy_cost_s(problem, profile) > 2 * 8192 * 8192 / hbm  # one read and one write of B, and a launch
    nt = Problem(8192, 8192, 8192, dtype="fp8e4m3", layout="nt")
    assert api._plan(nt, profile) == (api.select_problem(nt, profile).config, False)
    assert api.copy_cost_s(nt, profile) == 0.0


def test_decode_and_wide_suites() -> None:
    decode = shapes.load_suite("decode")
    weights = {(n, k) for _, _, n, k in shapes.load_suite("llm")}
    assert {(n, k) for _, _, n, k in decode} == weights
    assert len(decode) == len(weights) * len(shapes.DECODE_M)
    assert sorted({m for _, m, _, _ in decode}) == list(shapes.DECODE_M)
    wide = shapes.load_suite_rows("wide:200:3")
    assert wide == shapes.load_suite_rows("wide:200:3")  # reproducible
    for key, (low, high) in shapes.WIDE_RANGES.items():
        values = [int(r[key]) for r in wide]
        assert min(values) >= low and max(values) <= high
    assert min(int(r["M"]) for r in wide) <= 4 and max(int(r["N"]) for r in wide) > 32768
    assert {r["layout"] for r in wide} == {"nn", "nt"}
    assert any(int(r["K"]) % 8 for r in wide) and any(int(r["K"]) % 64 == 0 for r in wide)
    assert shapes.load_suite("random:3:1") == shapes.load_suite("random:3:1")
    with pytest.raises(shapes.ShapeSuiteError, match="wide:COUNT:SEED"):
        shapes.load_suite("wide:x")
    for empty in ("wide:0:5", "random:0:5", "random:-2:5"):  # an empty suite would validate nothing, silently
        with pytest.raises(shapes.ShapeSuiteError, match="COUNT must be at least 1"):
            shapes.load_suite(empty)
    with pytest.raises(shapes.ShapeSuiteError, match="random:COUNT:SEED"):
        shapes.load_suite("random:3:x")
