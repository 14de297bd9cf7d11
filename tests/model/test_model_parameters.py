"""Fitted model parameters live in the profile: stored by evaluate --write-profile, read back by the model."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
from theodolite.kernels.config import GemmConfig, Problem, operand_loads
from theodolite.model import core
from theodolite.model.evaluate import write_parameters
from theodolite.model.hardware import (
    FITTED_PARAMETERS,
    MODEL_PARAMETERS,
    hardware,
    parameter_sources,
    reset_parameters,
)
from theodolite.model.predict import clear_tables, predict

from theodolite.api import select_problem
from theodolite.profile import load_profile
from theodolite.profile.datasheet import h100_sxm
from theodolite.profile.schema import METRICS, Measurement


def _fitted(**values: float):  # type: ignore[no-untyped-def]
    """The H100 datasheet profile with these model parameters stored as model-fit metrics."""
    base = h100_sxm()
    fits = {name: Measurement(name, value, METRICS[name].unit, "model-fit") for name, value in values.items()}
    return dataclasses.replace(base, metrics={**base.metrics, **fits})


def _measured_h100():  # type: ignore[no-untyped-def]
    """The bundled, measured H100 profile."""
    return load_profile(Path(__file__).resolve().parents[2] / "profiles" / "nvidia-h100-80gb-hbm3.h5")


def _measured_h100_with(name: str, value: float):  # type: ignore[no-untyped-def]
    """The measured H100 profile with one model parameter stored as a model-fit metric."""
    measured = _measured_h100()
    fit = Measurement(name, value, METRICS[name].unit, "model-fit")
    return dataclasses.replace(measured, metrics={**measured.metrics, name: fit})


def test_every_model_parameter_is_an_optional_metric() -> None:
    for name in MODEL_PARAMETERS:
        spec = METRICS[name]
        assert not spec.required
        assert spec.unit in ("1", "cycle", "s")
        assert "model fit" in spec.description


def test_round_trip_through_the_profile_writer(tmp_path) -> None:  # type: ignore[no-untyped-def]
    reset_parameters()
    base = h100_sxm()
    assert set(hardware(base, "bf16").defaults_used) == set(FITTED_PARAMETERS)
    path = tmp_path / "fitted.h5"
    write_parameters(base, {"model_iteration_overhead": 321.0, "model_launch_extra": 7e-7}, str(path), ["r.json"])
    loaded = load_profile(path)
    stored = loaded.metrics["model_iteration_overhead"]
    assert stored.value == 321.0
    assert stored.unit == "cycle"
    assert stored.method == "model-fit"
    assert list(stored.settings["results"]) == ["r.json"]
    assert loaded.metrics["model_launch_extra"].unit == "s"
    sources = parameter_sources(loaded)
    assert sources["model_iteration_overhead"] == "profile"
    assert sources["model_tile_overhead"] == "default"
    hw = hardware(loaded, "bf16")
    assert "model_iteration_overhead" not in hw.defaults_used
    assert "model_tile_overhead" in hw.defaults_used
    assert hw.iteration_overhead_s == pytest.approx(321.0 / hw.clock_hz)
    # everything the profile had is kept
    assert loaded.value("sm_count") == base.value("sm_count")


def test_a_profile_value_changes_predictions() -> None:
    reset_parameters()
    base = h100_sxm()
    slower = _fitted(model_iteration_overhead=4000.0)
    problem = Problem(4096, 4096, 4096)
    config = GemmConfig("persistent", 128, 128, 64, num_warps=8, flatten=True)
    clear_tables()
    t_base = predict(problem, config, base).time_s
    t_slow = predict(problem, config, slower).time_s
    assert t_slow > t_base * 1.05


def test_scalar_load_cost_from_the_profile_reaches_misaligned_predictions() -> None:
    reset_parameters()
    base = h100_sxm()
    costly = _fitted(model_scalar_load_cost=8.0)
    problem = Problem(300, 299, 777)  # misaligned rows, below the copy threshold: scalar loads
    config = GemmConfig("persistent", 64, 64, 128, num_warps=4, num_stages=4, flatten=True)
    assert predict(problem, config, costly).time_s > predict(problem, config, base).time_s


def test_scalar_batches_count_round_trips() -> None:
    hw = hardware(h100_sxm(), "bf16")

    class C:
        bm, bn, bk, warps = 128.0, 128.0, 128.0, 8.0

    in_flight = hw.scalar_in_flight
    per_thread = (128 + 128) * 128 / (8 * hw.warp_size)
    expected = max(-(-per_thread // in_flight), 1.0)
    assert core.scalar_batches(C, 2.0, 2.0, hw, core.ScalarOps) == expected
    assert core.scalar_batches(C, 16.0, 16.0, hw, core.ScalarOps) == 1.0


def test_scalar_loads_cost_by_the_direction_of_the_operand_rows() -> None:
    """A misaligned operand whose rows run along K (A row-major, B column-major) costs model_scalar_k_load_share
    of one whose rows run along M or N, per load; aligned operands keep their vector width."""
    from theodolite.model.predict import alignment, scalar_widths

    reset_parameters()
    costly = _fitted(model_scalar_load_cost=10.0, model_scalar_k_load_share=0.5)
    hw = hardware(costly, "bf16")
    along_mn, along_k = 2.0 / 10.0, 2.0 / 5.0
    assert scalar_widths("nn", hw, "bf16") == pytest.approx((along_k, along_mn))
    assert scalar_widths("tt", hw, "bf16") == pytest.approx((along_mn, along_k))
    assert scalar_widths("nt", hw, "bf16") == pytest.approx((along_k, along_k))
    assert alignment(Problem(300, 299, 777), hw)[:2] == pytest.approx((along_k, along_mn))
    assert alignment(Problem(300, 1024, 777), hw)[:2] == pytest.approx((along_k, 16.0))


def test_scalar_round_trips_floor_the_batches() -> None:
    hw = dataclasses.replace(hardware(h100_sxm(), "bf16"), scalar_round_trips=3.5, scalar_in_flight=32.0)

    class C:
        bm, bn, bk, warps = 64.0, 64.0, 64.0, 4.0

    assert core.scalar_batches(C, 2.0, 2.0, hw, core.ScalarOps) == 3.5  # 64 loads a thread: 2 batches < 3.5
    assert core.scalar_batches(C, 2.0, 2.0, dataclasses.replace(hw, scalar_in_flight=8.0), core.ScalarOps) == 8.0


def test_tma_latency_hiding_costs_tma_configs_only() -> None:
    """model_tma_latency_hiding slows TMA configs whose K-step waits on latency, and no pointer-based config:
    dev012 of random-dev (640x3072x9088, one wave) with 3 stages, where the H100 measured TMA 80.9 us and the
    pointer kernel 78.7 (full hiding had TMA at 69)."""
    reset_parameters()
    problem = Problem(640, 3072, 9088)
    tma = GemmConfig("tma", 128, 128, 64, num_warps=8, num_stages=3)
    pointer = GemmConfig("persistent", 128, 128, 64, num_warps=8, num_stages=3, flatten=True)
    full, half = (_measured_h100_with("model_tma_latency_hiding", value) for value in (1.0, 0.5))
    clear_tables()
    assert predict(problem, tma, half).time_s > predict(problem, tma, full).time_s * 1.1
    assert predict(problem, pointer, half).time_s == predict(problem, pointer, full).time_s
    # the wait (core.stage_wait) with half the hiding: between sqrt(2) (L2-loaded) and 2 (latency alone) times longer
    lat_full = predict(problem, tma, full).breakdown["iter_latency"]
    ratio = predict(problem, tma, half).breakdown["iter_latency"] / lat_full
    assert math.sqrt(2.0) < ratio <= 2.0 + 1e-9


def test_tma_l2_bandwidth_scale_moves_tma_configs_l2_time_only() -> None:
    """model_tma_l2_bandwidth_scale divides a TMA config's L2 time and leaves pointer-based configs alone: an L2-bound
    shape (512x4096x14336, 128x128x64 w8 s6, where the H200 measured TMA at 0.84x the pointer kernel's time)."""
    reset_parameters()
    problem = Problem(512, 4096, 14336)
    tma = GemmConfig("tma", 128, 128, 64, num_warps=8, num_stages=6)
    pointer = GemmConfig("persistent", 128, 128, 64, num_warps=8, num_stages=6)
    one, faster = (_measured_h100_with("model_tma_l2_bandwidth_scale", value) for value in (1.0, 1.25))
    clear_tables()
    assert predict(problem, tma, faster).breakdown["l2_time"] == pytest.approx(
        predict(problem, tma, one).breakdown["l2_time"] / 1.25, rel=1e-9
    )
    assert predict(problem, tma, faster).time_s < predict(problem, tma, one).time_s
    assert predict(problem, pointer, faster).time_s == predict(problem, pointer, one).time_s
    # a K-step's matrix work is not the L2's
    compute = [predict(problem, tma, profile).breakdown["iter_compute"] for profile in (faster, one)]
    assert compute[0] == compute[1]
    clear_tables()


def test_splitk_fixup_holds_the_wait_not_the_count_in(monkeypatch: pytest.MonkeyPatch) -> None:
    """A split-K tile's fix-up is the last slice's wait for the partials (one fill latency) and their chain; its
    count-in is priced with its round of programs, so the fix-up does not move with SPLITK_COUNT_IN_TRIPS."""
    reset_parameters()
    profile = _measured_h100()  # a measured L2 latency (a datasheet has none)
    assert hardware(profile, "bf16").l2_latency_s > 0
    problem = Problem(256, 256, 8448)
    split = GemmConfig("splitk", 64, 64, 128, num_warps=4, num_stages=4, split_k=8)
    clear_tables()
    with_trips = predict(problem, split, profile)
    monkeypatch.setattr(core, "SPLITK_COUNT_IN_TRIPS", 0.0)
    clear_tables()
    without = predict(problem, split, profile)
    clear_tables()
    assert with_trips.breakdown["fixup"] == without.breakdown["fixup"]
    assert with_trips.time_s > without.time_s


def test_every_split_k_program_pays_its_count_in(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each split-K program's count-in (release, acq_rel add: SPLITK_COUNT_IN_TRIPS L2 round trips) holds its SM
    slot, so a split with more programs than slots pays it once per round of programs on its SMs' time; other
    variants never."""
    reset_parameters()
    profile = _measured_h100()  # a measured L2 latency (a datasheet has none)
    hw = hardware(profile, "bf16")
    assert hw.l2_latency_s > 0
    problem = Problem(8, 16384, 8192, layout="nt")  # 256 tiles of 16x64, eight slices each: rounds of programs
    split = GemmConfig("splitk", 16, 64, 128, num_warps=4, num_stages=4, split_k=8)
    plain = GemmConfig("persistent", 16, 64, 128, num_warps=4, num_stages=4)
    clear_tables()
    with_trips = predict(problem, split, profile), predict(problem, plain, profile).time_s
    monkeypatch.setattr(core, "SPLITK_COUNT_IN_TRIPS", 0.0)
    clear_tables()
    without = predict(problem, split, profile), predict(problem, plain, profile).time_s
    clear_tables()
    rounds = with_trips[0].details["waves"]
    assert rounds > 1
    assert with_trips[0].breakdown["fixed_per_item"] - without[0].breakdown["fixed_per_item"] == pytest.approx(
        2.0 * hw.l2_latency_s, rel=1e-9
    )
    # on the SMs' time, per round (a weight stream this size is HBM-bound overall: the rounds' trips hide there)
    added = with_trips[0].breakdown["sm_time"] - without[0].breakdown["sm_time"]
    assert added == pytest.approx(rounds * 2.0 * hw.l2_latency_s, rel=0.05)
    assert with_trips[1] == without[1]


def test_splitk_reduce_cost_slows_split_k_only() -> None:
    """model_splitk_reduce_cost scales the last slice's partial reads (split x tile x 4 bytes at the per-SM
    bandwidth) and nothing of the other variants."""
    reset_parameters()
    base, costly = _fitted(model_splitk_reduce_cost=1.0), _fitted(model_splitk_reduce_cost=2.0)
    hw = hardware(base, "bf16")
    problem = Problem(128, 384, 8192)  # 6 tiles of 64x64: one per SM, the chain is one tile's partials
    split = GemmConfig("splitk", 64, 64, 128, num_warps=4, num_stages=4, split_k=8)
    plain = GemmConfig("persistent", 64, 64, 128, num_warps=4, num_stages=4, flatten=True)
    clear_tables()
    chain = 8 * 64 * 64 * core.PARTIAL_BYTES / hw.sm_bandwidth
    fix_base = predict(problem, split, base).breakdown["fixup"]
    fix_costly = predict(problem, split, costly).breakdown["fixup"]
    assert fix_costly - fix_base == pytest.approx(chain, rel=1e-9)
    assert predict(problem, plain, costly).time_s == predict(problem, plain, base).time_s


def test_an_element_wise_k_step_is_issue_then_wait() -> None:
    """A program with element-wise (synchronous) loads issues them, waits for the last, then stores them and runs its
    matrix instructions: its K-step is the sum of the three, not the slower of issue and wait (that form predicted
    one-wave split-K K-steps 1.7-3.0x too fast on both GPUs; experiments/model_checks.py scalar-steps)."""
    from theodolite.model.predict import alignment_and_loads, evaluate, table_for

    reset_parameters()
    clear_tables()
    measured = _measured_h100()
    table = table_for(measured, "bf16")
    problem = Problem(132, 107, 1389)  # random-dev's dev074: both operands read element-wise
    a_vec, b_vec, _, loads = alignment_and_loads(problem, table.hw)
    assert loads == "scalar"
    view = table.for_loads(loads)
    i = table.index["splitk/16x64x128/g8/w4/s4/k4"]
    _, terms = evaluate(table, problem, detail=True)
    assert terms["#resident_per_sm"][i] == 1 and terms["#waves"][i] == 1
    issue = float(core.per_program(view, a_vec, b_vec)[i])
    wait = float(terms["iter_latency"][i])
    overhead = table.hw.iteration_overhead_s + float(view.it_extra[i])
    assert issue > 0 and wait > 0
    assert float(terms["iter_total"][i]) == pytest.approx(issue + wait + overhead)


@pytest.mark.parametrize("profile_file", ["nvidia-h100-80gb-hbm3.h5", "nvidia-h200.h5"])
def test_few_tiles_over_a_long_element_wise_k_split_deep(profile_file: str) -> None:
    """random-dev's dev039 (19x127x14455: four 16x64 tiles, both operands read element-wise, one latency per
    K-step): the space's deep splits are picked over 16 slices, as measured on both GPUs (H100 16x64x128 k16
    26.4 us, k32 16.5, k64 15.3; H200 27.4 / 17.0 / 15.7: experiments/deep_splitk.py)."""
    reset_parameters()
    clear_tables()
    profile = load_profile(Path(__file__).resolve().parents[2] / "profiles" / profile_file)
    problem = Problem(19, 127, 14455)
    assert operand_loads(problem) == "scalar"
    pick = select_problem(problem, profile).config
    assert (pick.variant, pick.block_m, pick.block_n, pick.block_k) == ("splitk", 16, 64, 128)
    assert pick.split_k >= 32
    k16 = predict(problem, GemmConfig("splitk", 16, 64, 128, 8, 4, 4, split_k=16), profile).time_s
    assert predict(problem, pick, profile).time_s < k16


def test_hbm_read_share_follows_the_profiles_measured_curve() -> None:
    """The HBM bandwidth a kernel's active SMs reach is read off the profile's hbm_read_bandwidth_vs_sms curve (one SM
    alone streams at its own ceiling: the H100 curve's 93 GB/s of 3076 at 132 SMs), not the linear ramp to 90% at
    hbm_saturation_sms (which gave one SM 3197 x 0.9 / 53 = 54 GB/s and 16 SMs 0.27 of the best, measured 0.44)."""
    from theodolite.model.hardware import read_shares

    profile = _measured_h100()
    curve = profile.curves["hbm_read_bandwidth_vs_sms"]
    best = float(max(curve.y))
    shares = read_shares(profile, 132)
    assert len(shares) == 133 and shares[0] == 0.0 and shares[132] == pytest.approx(1.0)
    for sms, read in zip(curve.x, curve.y, strict=True):
        assert shares[int(sms)] == pytest.approx(max(float(read) for x, read in zip(curve.x, curve.y, strict=True)
                                                     if x <= sms) / best)  # fmt: skip
    assert all(a <= b for a, b in zip(shares, shares[1:], strict=False))  # more SMs never read less
    hw = hardware(profile, "bf16")
    linear = 0.9 * 16 / hw.hbm_saturation_sms
    assert core.read_share(np.array([16.0]), hw)[0] > 1.5 * linear  # the curve, not the ramp
    # a profile without the curve keeps the ramp
    bare = dataclasses.replace(profile, curves={k: c for k, c in profile.curves.items()
                                                if k != "hbm_read_bandwidth_vs_sms"})  # fmt: skip
    assert read_shares(bare, 132) == ()
    assert core.read_share(np.array([16.0]), hardware(bare, "bf16"))[0] == pytest.approx(linear)


def test_few_tiles_of_a_long_skinny_gemm_read_hbm_at_the_curves_rate() -> None:
    """A GEMM of four 16x128 tiles over K 51584 (2x480x51584, H100 sweep: 198 us measured with persistent 16x128x128,
    the ramp predicted 230 us from 4 SMs at 54 GB/s each) is HBM-bound at what four SMs read on the curve."""
    reset_parameters()
    clear_tables()
    profile = _measured_h100_with("model_hbm_bandwidth_scale", 1.0)
    problem = Problem(2, 480, 51584)
    config = GemmConfig("persistent", 16, 128, 128, num_warps=4, num_stages=4)
    result = predict(problem, config, profile)
    hw = hardware(profile, "bf16")
    b_bytes = 480 * 51584 * 2
    four = hw.hbm_read_bandwidth * hw.hbm_read_share[4]
    assert result.breakdown["hbm_time"] == pytest.approx(b_bytes / four, rel=0.05)
    assert 4 * 80e9 < four < 4 * 100e9  # four SMs at about the one-SM ceiling (H100: 93 GB/s)
    clear_tables()


def test_hbm_bandwidth_scale_divides_the_tile_reads_hbm_time() -> None:
    """model_hbm_bandwidth_scale: the HBM read bandwidth the tile loads reach relative to hbm_read_bandwidth.  An
    HBM-bound shape's (8x16384x16384: the weight matrix read once) HBM time scales as its inverse; a shape that fits
    in L2 and is bound by its matrix work does not move."""
    reset_parameters()
    config = GemmConfig("persistent", 16, 128, 128, num_warps=4, num_stages=4)
    one, slower = (_measured_h100_with("model_hbm_bandwidth_scale", value) for value in (1.0, 0.7))
    clear_tables()
    skinny = Problem(8, 16384, 16384)
    times = [predict(skinny, config, profile).breakdown for profile in (one, slower)]
    stores = 16 * 16384 * 2 / hardware(one, "bf16").hbm_write_bandwidth  # whole 16-row tiles written
    assert times[1]["hbm_time"] - stores == pytest.approx((times[0]["hbm_time"] - stores) / 0.7, rel=1e-6)
    assert predict(skinny, config, slower).time_s > 1.3 * predict(skinny, config, one).time_s
    square = Problem(2048, 2048, 2048)
    big = GemmConfig("persistent", 128, 256, 64, num_warps=8, num_stages=4, flatten=True)
    assert predict(square, big, slower).time_s == pytest.approx(predict(square, big, one).time_s, rel=1e-9)
    clear_tables()


def test_short_rows_along_k_read_hbm_at_their_share() -> None:
    """A weight stream (M = 8, HBM-bound) whose B rows run along K (nt) reads them BLOCK_K a step: at 128 bytes its HBM
    time grows by 1 / model_short_row_read_share, at 256 it does not; in nn B's rows run along N and keep their
    time (A's 8 rows along K are a rounding error of the stream)."""
    base, slow = _measured_h100(), _measured_h100_with("model_short_row_read_share", 0.8)
    short = GemmConfig.from_key("persistent/64x64x64/g8/w4/s12/k1")
    long_ = GemmConfig.from_key("persistent/64x64x128/g8/w4/s6/k1")
    nt, nn = Problem(8, 33792, 16384, layout="nt"), Problem(8, 33792, 16384)

    def hbm(problem: Problem, config: GemmConfig, profile) -> float:  # type: ignore[no-untyped-def]
        return predict(problem, config, profile).breakdown["hbm_time"]

    assert hbm(nt, short, slow) > 1.2 * hbm(nt, short, base)
    assert predict(nt, short, slow).time_s > 1.15 * predict(nt, long_, slow).time_s
    assert hbm(nt, long_, slow) == pytest.approx(hbm(nt, long_, base), rel=1e-9)
    assert hbm(nn, short, slow) == pytest.approx(hbm(nn, short, base), rel=2e-3)
