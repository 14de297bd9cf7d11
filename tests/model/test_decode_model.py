"""The decode family in the model: legal for M <= DECODE_MAX_M only (full and fast paths alike), priced near the
weights' read time on the bundled H100 profile, and never a candidate for large shapes."""

from __future__ import annotations

from pathlib import Path

import pytest
from theodolite.kernels.config import DECODE_MAX_M, Problem, decode_configs, is_decode, legality
from theodolite.model import fast
from theodolite.model.predict import choose_index, rank, table_for

from theodolite.profile.hdf5 import load_profile

PROFILES = Path(__file__).resolve().parents[2] / "profiles"


@pytest.fixture(scope="module")
def h100():  # type: ignore[no-untyped-def]
    return load_profile(PROFILES / "nvidia-h100-80gb-hbm3.h5")


def test_family_is_new_configs_for_every_dtype() -> None:
    for dtype in ("bf16", "fp16", "fp32", "tf32", "fp8e4m3"):
        family = decode_configs(dtype)
        assert len(family) >= 8, dtype
        assert all(is_decode(c, dtype) and c.block_m <= DECODE_MAX_M for c in family)
        assert {c.variant for c in family} == {"splitk", "persistent"}


def test_decode_configs_refuse_more_rows_with_a_reason(h100) -> None:  # type: ignore[no-untyped-def]
    limits = table_for(h100, "bf16").hw.limits
    for config in decode_configs("bf16"):
        assert legality(config, Problem(DECODE_MAX_M + 1, 4096, 4096, layout="nt"), limits) is not None
        reason = legality(config, Problem(DECODE_MAX_M + 1, 4096, 4096, layout="nt"), limits)
        assert f"M <= {DECODE_MAX_M}" in str(reason)
        assert legality(config, Problem(DECODE_MAX_M + 1, 4096, 4096), limits, shape_rules=False) is None
    # M = DECODE_MAX_M itself is served, where the tile's other rules allow it
    legal = [c for c in decode_configs("bf16") if legality(c, Problem(DECODE_MAX_M, 4096, 4096), limits) is None]
    assert legal


@pytest.mark.parametrize("m", [1, 8, 16])
@pytest.mark.parametrize("nk", [(4096, 14336), (14336, 4096), (4096, 4096)])
def test_decode_shapes_priced_near_the_weights_read(h100, m: int, nk: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
    """The pick's time is the weights read once at the profile's HBM read bandwidth plus a launch, give or take."""
    n, k = nk
    best = rank(Problem(m, n, k, dtype="bf16", layout="nt"), h100)[0]
    floor = 2 * n * k / h100.value("hbm_read_bandwidth") + h100.value("launch_overhead_graph")
    assert 0.9 * floor <= best.time_s <= 1.5 * floor, (best.key, best.time_s, floor)


def test_model_picks_a_decode_sized_tile_for_aligned_llm_decode(h100) -> None:  # type: ignore[no-untyped-def]
    """At M = 1 on llama-sized weights the model ranks a 16-row tile first (the family's or the base tables'; on the
    H100 the family measured 0.985 of the base's best, experiments/decode_bench.py), and it prices the family's
    deeper K-steps among its top candidates."""
    for n, k in [(4096, 14336), (4096, 4096)]:
        ranked = rank(Problem(1, n, k, dtype="bf16", layout="nt"), h100)
        assert ranked[0].config.block_m == 16, ranked[0].key
        assert any(is_decode(p.config, "bf16") for p in ranked[:8]), [p.key for p in ranked[:8]]


def test_large_shapes_never_rank_the_family(h100) -> None:  # type: ignore[no-untyped-def]
    for m, n, k in [(4096, 4096, 4096), (65, 51555, 3749), (8192, 128, 8192)]:
        ranked = rank(Problem(m, n, k, dtype="bf16", layout="nt"), h100)
        assert ranked and not any(is_decode(p.config, "bf16") for p in ranked), (m, n, k)


@pytest.mark.parametrize("m", [1, 2, 7, 33, 45, 63, 64, 65, 70, 90])
def test_fast_path_applies_the_m_rule(h100, m: int) -> None:  # type: ignore[no-untyped-def]
    """The fast path's masks leave the M rule out (one mask per kind of problem); best_of applies it, so the pick
    is legal on both sides of DECODE_MAX_M (which the grid cell [64, 90.5) straddles) and the exact argmin here."""
    table = table_for(h100, "bf16")
    for n, k in [(4096, 4096), (14336, 4096), (1024, 8192)]:
        problem = Problem(m, n, k, dtype="bf16", layout="nt")
        i_fast, _ = fast.choose_fast(table, problem)
        i_full, times = choose_index(table, problem)
        assert legality(table.configs[i_fast], problem, table.hw.limits) is None
        assert float(times[i_fast]) <= float(times[i_full]) * 1.03, (m, n, k, table.keys[i_fast], table.keys[i_full])
        if m > DECODE_MAX_M:
            assert not is_decode(table.configs[i_fast], "bf16")
