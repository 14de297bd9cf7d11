"""CPU tests of the model: legality, determinism, monotone sanity, wave arithmetic, portability."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from theodolite.kernels.config import KernelLimits, Problem, config_space, legality, operand_loads
from theodolite.model import choose, predict, rank
from theodolite.model.hardware import hardware, launch_seconds
from theodolite.model.occupancy import last_wave_busy_fraction, waves
from theodolite.model.predict import BOTTLENECKS, table_for

from theodolite.profile.datasheet import h100_sxm, mi300x
from theodolite.profile.schema import Measurement, Profile

H100 = h100_sxm()
MI300X = mi300x()

SHAPES = [
    (4096, 4096, 4096),
    (16, 4096, 4096),
    (1, 6144, 4096),
    (128, 8192, 8192),
    (8192, 8192, 8192),
    (1000, 1000, 1000),
    (64, 64, 65536),
    (4095, 4097, 4099),
    (13696, 512, 1152),
    (1644, 21, 1243),
]


def _with(profile: Profile, **values: float) -> Profile:
    metrics = dict(profile.metrics)
    for name, value in values.items():
        metrics[name] = (
            dataclasses.replace(metrics[name], value=value)
            if name in metrics
            else Measurement(name=name, value=value, unit="1", method="test")
        )
    return dataclasses.replace(profile, metrics=metrics, origin=f"{profile.origin}+{sorted(values.items())}")


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("layout", ["nn", "nt", "tn"])
def test_rank_is_exactly_the_legal_configs(shape: tuple[int, int, int], layout: str) -> None:
    problem = Problem(*shape, layout=layout)
    limits = KernelLimits.from_profile(H100)
    ranked = rank(problem, H100)
    legal = {c.key for c in config_space("bf16") if legality(c, problem, limits) is None}
    assert {p.key for p in ranked} <= legal
    assert len(ranked) >= 0.9 * len(legal)  # only configs that cannot be resident are dropped beyond legality
    times = [p.time_s for p in ranked]
    assert times == sorted(times)
    assert ranked[0].config == choose(problem, H100).config
    for p in ranked:
        assert p.bottleneck in BOTTLENECKS
        assert p.time_s > 0 and p.tflops > 0


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 20000), st.integers(1, 20000), st.integers(1, 20000), st.sampled_from(["nn", "nt", "tn", "tt"]))
def test_never_picks_an_illegal_config(m: int, n: int, k: int, layout: str) -> None:
    problem = Problem(m, n, k, layout=layout)
    pick = choose(problem, H100)
    build = H100.kernel_build(pick.config.variant, pick.config.key, "bf16")
    assert legality(pick.config, problem, KernelLimits.from_profile(H100), build) is None


def test_legal_mask_matches_legality_over_classes() -> None:
    table = table_for(H100, "bf16")
    limits = KernelLimits.from_profile(H100)
    for m, n, k in SHAPES + [(7, 9, 11), (100, 3, 100), (129, 129, 129), (33, 4097, 63)]:
        for layout in ("nn", "nt", "tn", "tt"):
            problem = Problem(m, n, k, layout=layout)
            mask = table.legal_mask(problem)
            pairs = zip(table.configs, table.builds, strict=True)
            expected = [legality(c, problem, limits, b) is None for c, b in pairs]
            assert [bool(x) for x in mask] == [e and f for e, f in zip(expected, table.fit_ok, strict=False)]


def test_deterministic_across_processes() -> None:
    code = (
        "import json; from theodolite.api import select; from theodolite.profile.datasheet import h100_sxm; "
        "h = h100_sxm(); print(json.dumps([select(m, n, k, profile=h).config.key for m, n, k in "
        f"{SHAPES!r}]))"
    )
    outputs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
               for _ in range(2)]  # fmt: skip
    assert outputs[0] == outputs[1]
    here = [choose(Problem(*s), H100).config.key for s in SHAPES]
    assert json.loads(outputs[0]) == here


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 256), st.integers(256, 16384), st.integers(256, 16384), st.floats(1.01, 4.0))
def test_faster_hbm_never_slows_a_prediction(m: int, n: int, k: int, factor: float) -> None:
    problem = Problem(m, n, k)
    fast = _with(H100, hbm_read_bandwidth=H100.value("hbm_read_bandwidth") * factor,
                 hbm_copy_bandwidth=H100.value("hbm_copy_bandwidth") * factor)  # fmt: skip
    for config in [p.config for p in rank(problem, H100)[:5]]:
        assert predict(problem, config, fast).time_s <= predict(problem, config, H100).time_s * (1 + 1e-12)
    assert choose(problem, fast).time_s <= choose(problem, H100).time_s * (1 + 1e-12)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 16384), st.integers(1, 16384), st.integers(1, 16384), st.integers(1, 64))
@example(2753, 1, 2561, 1)  # 133 items in flight over a 44-tile plane once counted as 4 whole planes of reads
@example(65, 2305, 1729, 1)  # 19 tiles: 6 -> 7 slices each once wrote 133 output tiles instead of 19
@example(12545, 129, 1, 10)  # a last wave's few writers once shared the write bandwidth as a whole wave's
def test_more_sms_never_slower(m: int, n: int, k: int, extra: int) -> None:
    """The best over the configs legal on both machines (split-K's tile limit depends on the SM count) is at most
    2% slower: a wider wave can re-read a panel once more, and few tiles over more programs are more partial
    tiles.  Stream-K configs whose last-wave split changes are left out: the kernel cuts the tail into as many
    K-slices as there are programs, and on a memory-bound tail more slices are rightly slower (more fp32
    partials for the same panel traffic; 1442x764x4208, 128x256 tiles: 3 slices on 132 SMs, 5 on 183, 12%
    slower; measured on the H100, 128x4096x4096 with 128x256 tiles takes 4% longer in 8 slices than in 5)."""
    problem = Problem(m, n, k)
    sms = H100.value("sm_count")
    per_sm = H100.value("mma_throughput_bf16") / sms
    bigger = _with(H100, sm_count=sms + extra, mma_throughput_bf16=per_sm * (sms + extra),
                   mma_throughput_fp16=per_sm * (sms + extra))  # fmt: skip
    here = {p.key: p for p in rank(problem, H100)}
    there = {p.key: p for p in rank(problem, bigger)}
    both = [key for key in here.keys() & there.keys()
            if here[key].details["tail_split"] == there[key].details["tail_split"]]  # fmt: skip
    assert min(there[key].time_s for key in both) <= min(here[key].time_s for key in both) * 1.02


def test_a_split_streamk_tail_writes_each_output_tile_once() -> None:
    """1442x764x4208 with 128x256 tiles: 36 tiles, all in a one-wave tail cut into 3 K-slices each on 132 SMs
    (108 programs).  The output is written once per tile, not once per slice: an fp32 output instead of bf16
    adds 36 tiles x 2 bytes per element to the HBM writes (it once added 108)."""
    key = "streamk/128x256x64/g8/w8/s3/k1"
    bf16, fp32 = (next(p for p in rank(Problem(1442, 764, 4208, out_dtype=out), H100) if p.key == key)
                  for out in ("bf16", "fp32"))  # fmt: skip
    assert (bf16.details["tail_split"], bf16.details["items"]) == (3.0, 108.0)
    grown = fp32.breakdown["hbm_time"] - bf16.breakdown["hbm_time"]
    assert grown == pytest.approx(36 * 128 * 256 * 2 / hardware(H100, "bf16").hbm_write_bandwidth, rel=1e-9)


def test_a_streamk_grid_wider_than_its_residency_runs_its_tail_in_rounds() -> None:
    """The measured H200 profile launches more Stream-K 64x64x64 programs per SM than its build lets reside; on
    2184x632x156 all 350 tiles are the unsplit tail (fewer than the grid), but only 264 run at once: the rest wait
    for a second round, as its persistent twin's second wave does (priced as one round of 350 they ran 1.4x faster
    than the twin in the model and the same on the GPU)."""
    from pathlib import Path

    from theodolite.model.predict import evaluate

    from theodolite.profile.hdf5 import load_profile

    profile = load_profile(Path(__file__).resolve().parents[2] / "profiles" / "nvidia-h200.h5")
    table = table_for(profile, "bf16")
    sk, twin = table.index["streamk/64x64x64/g8/w4/s4/k1"], table.index["persistent/64x64x64/g8/w4/s4/k1"]
    problem = Problem(2184, 632, 156)
    view = table.for_loads(operand_loads(problem))  # the residency of the binary that runs (K = 156: 8-byte rows)
    assert view.pprog[sk] > 350 > view.slots[sk]  # the premise: the grid exceeds what resides
    times, terms = evaluate(table, problem, detail=True)
    assert terms["#tail_split"][sk] == 1.0 and terms["#waves"][sk] == 2.0
    assert times[sk] == pytest.approx(times[twin], rel=1e-9)


def test_a_split_streamk_tail_pays_its_reduction() -> None:
    """The same 3-slice tail (1442x764x4208, 128x256 tiles): each slice stores its fp32 partial and reduces 3 of
    the 8 row chunks of all 3 partials, so its partial traffic is 128 x 256 x 4 x (1 + 3/8 x 3) bytes at one SM's
    bandwidth times model_streamk_reduce_cost, and its chunk loads are a chain of 3 x 3 L2 round trips (plus
    two for the count-in and the wait).  An unsplit tail pays none of it."""
    from theodolite.model.hardware import reset_parameters, set_parameters

    problem = Problem(1442, 764, 4208)
    split, whole = _config("streamk/128x256x64/g8/w8/s3/k1"), _config("persistent/128x256x64/g8/w8/s3/k1/f")
    hw = hardware(H100, "bf16")
    try:
        times = {}
        for cost in (1.0, 3.0):
            set_parameters(model_streamk_reduce_cost=cost)
            times[cost] = (predict(problem, split, H100), predict(problem, whole, H100))
    finally:
        reset_parameters()
    (cheap, whole_1), (dear, whole_3) = times[1.0], times[3.0]
    assert cheap.details["tail_split"] == 3.0
    partials = 128 * 256 * 4 * (1 + 3 / 8 * 3)
    assert dear.breakdown["sm_time"] - cheap.breakdown["sm_time"] == pytest.approx(2 * partials / hw.sm_bandwidth)
    assert whole_3.time_s == whole_1.time_s
    # the tail's fixed part at cost 1: the traffic above, the bf16 output rows it writes less than a whole
    # tile's, and 2 + 9 L2 round trips
    out_share = 128 * 256 * 2 * (3 / 8 - 1)
    tail = (partials + out_share) / hw.sm_bandwidth + (2 + 9) * hw.l2_latency_s
    unsplit_fixed = cheap.breakdown["fixed_per_item"]
    last_wave = cheap.breakdown["sm_time"] - unsplit_fixed - tail
    assert last_wave == pytest.approx(cheap.details["iterations"] / 3 * cheap.breakdown["iter_total"], rel=0.05)


def test_wave_quantization_by_hand() -> None:
    # 4096^2 with 128x256 tiles: 32 x 16 = 512 tiles on 132 SMs, one program each:
    # 3 full waves of 132, a last wave of 116 -> 116/132 busy.
    assert waves(512, 132) == (3, 116)
    assert last_wave_busy_fraction(512, 132) == pytest.approx(116 / 132)
    assert last_wave_busy_fraction(264, 132) == 1.0
    assert waves(131, 132) == (0, 131)
    pred = predict(Problem(4096, 4096, 4096), _config("persistent/128x256x64/g8/w8/s3/k1/f"), H100)
    assert pred.details["tiles"] == 512
    assert pred.details["waves"] == 4
    assert pred.details["last_wave_busy"] == pytest.approx(116 / 132)
    # one tile more than a full wave costs a whole extra tile time
    one = predict(Problem(128 * 132, 256, 4096), _config("persistent/128x256x64/g8/w8/s3/k1/f"), H100)
    two = predict(Problem(128 * 133, 256, 4096), _config("persistent/128x256x64/g8/w8/s3/k1/f"), H100)
    assert one.details["waves"] == 1 and two.details["waves"] == 2
    # the last wave holds one tile: the SMs need a whole extra tile time (64 iterations at least)
    assert two.breakdown["sm_time"] >= one.breakdown["sm_time"] + 64 * one.breakdown["iter_compute"] * 0.999
    assert two.time_s > one.time_s


def _config(key: str):  # type: ignore[no-untyped-def]
    from theodolite.kernels.config import GemmConfig

    return GemmConfig.from_key(key)


def test_mi300x_and_h100_pick_differently_and_explainably() -> None:
    problem = Problem(4096, 4096, 4096)
    h = choose(problem, H100)
    a = choose(problem, MI300X)
    assert h.config != a.config
    # MI300X has 64 KiB of LDS per CU: its pick must fit it, H100's (227 KiB) does not have to
    from theodolite.kernels.config import smem_bytes

    assert smem_bytes(a.config, "bf16") <= MI300X.value("smem_bytes_per_block")
    assert smem_bytes(h.config, "bf16") > MI300X.value("smem_bytes_per_block")
    assert a.config.variant != "tma"  # no TMA on gfx942


def test_predict_rejects_foreign_config() -> None:
    from theodolite.kernels.config import ConfigError, GemmConfig

    with pytest.raises(ConfigError):
        predict(Problem(64, 64, 64), GemmConfig("persistent", 512, 512, 64), H100)


def test_empty_problem() -> None:
    pick = choose(Problem(0, 4096, 4096), H100)
    assert pick.time_s == pytest.approx(launch_seconds(H100))


def test_launch_cost_is_the_graph_figure_where_the_profile_has_it() -> None:
    """Kernel timings keep the host ahead of the GPU, so a launch costs the GPU's own back-to-back gap
    (launch_overhead_graph); a profile without it falls back to the host-driven launch_overhead, and every prediction
    moves by exactly the difference (ranks unchanged)."""
    assert "launch_overhead_graph" not in H100.metrics
    assert launch_seconds(H100) == H100.value("launch_overhead")
    graph = Measurement(name="launch_overhead_graph", value=1.5e-6, unit="s", method="test")
    with_graph = dataclasses.replace(H100, metrics={**H100.metrics, graph.name: graph}, origin="h100+graph")
    assert launch_seconds(with_graph) == 1.5e-6
    difference = H100.value("launch_overhead") - 1.5e-6
    for key in ("persistent/128x128x64/g8/w8/s3/k1/f", "splitk/64x64x128/g8/w4/s4/k4", "tma/128x256x64/g8/w8/s3/k1/f"):
        before = predict(Problem(512, 1024, 2048), _config(key), H100).time_s
        after = predict(Problem(512, 1024, 2048), _config(key), with_graph).time_s
        assert before - after == pytest.approx(difference, rel=1e-6)
    assert choose(Problem(0, 64, 64), with_graph).time_s == pytest.approx(1.5e-6)


def test_reductions_follow_the_kernels() -> None:
    """Split-K reduces inside its one launch (no second-launch wait); so does Stream-K: its tail's slices each
    store a partial and reduce a share of the tile's row chunks, at one SM's bandwidth each."""
    sat = 55.0
    profile = _with(H100, hbm_saturation_sms=sat)
    per_sm = H100.value("hbm_read_bandwidth") / sat
    tiny = predict(Problem(16, 64, 1024), _config("splitk/16x64x128/g8/w4/s4/k8"), profile)
    assert tiny.breakdown["fixup"] < 0.25 * H100.value("launch_overhead")
    # 128x512 in 64x128 tiles: 8 tiles, each in min(264 // 8, 192 // 4, 8) = 8 slices of 24 K-steps
    config = _config("streamk/64x128x64/g8/w4/s4/k1")
    shape = Problem(128, 512, 12288)
    sliced = predict(shape, config, profile)
    split = sliced.breakdown
    assert split["fixup"] == 0.0 and sliced.details["items"] == 64 and sliced.details["concurrent"] == 64
    # against the same 8 tiles whole (data-parallel): a slice runs 1/8 of the K-steps, plus its reduction
    # (its partial stored, then 8 slices' partials of its one row chunk read: 2 x 32 KB at one SM's bandwidth)
    whole = predict(shape, _config("persistent/64x128x64/g8/w4/s4/k1"), profile).breakdown
    reduction = 2 * 64 * 128 * 4 / per_sm
    assert split["sm_time"] > reduction
    assert split["sm_time"] < whole["sm_time"] / 8 + 2 * reduction + 4e-6


def test_short_loops_pay_their_zero_filled_prologue() -> None:
    """A cp.async pipeline's prologue issues its stages - 1 prefetches even past a short loop's last K-step; the masked
    ones zero-fill their part of the stage, each warp-wide copy at ``model_zero_fill_cycles`` whatever its width, so
    rows read as 4- or 8-byte vectors take 4x / 2x the copies of 16-byte ones (H100, one K-step at 2-4 stages: a
    128x128x64 stage of 4-byte copies 0.67 us, of 16-byte ones 0.02-0.19; experiments/zero_fill.py);
    TMA copies and element-wise operands (loaded synchronously) have none."""
    metrics = dict(H100.metrics)
    name = "model_zero_fill_cycles"
    metrics[name] = Measurement(name=name, value=3.7, unit="cycle", method="test")
    profile = dataclasses.replace(H100, metrics=metrics, origin=f"{H100.origin}+zero_fill")
    copy = hardware(profile, "bf16").zero_fill_copy_s
    assert copy == pytest.approx(3.7 / H100.value("clock_sustained_matrix_hz"))

    def zero_fill(key: str, m: int, n: int, k: int) -> float:
        return float(predict(Problem(m, n, k), _config(key), profile).breakdown["zero_fill"])

    stage = (64 + 64) * 64 * 2 / 16 / 32 * copy  # the warp-wide 16-byte copies of one 64x64x64 bf16 stage
    plain = "persistent/64x64x64/g8/w4/s4/k1"
    assert zero_fill(plain, 128, 128, 64) == pytest.approx(2 * stage)  # 1 K-step of a 4-stage pipeline
    assert zero_fill(plain, 128, 128, 128) == pytest.approx(stage)
    assert zero_fill(plain, 128, 128, 192) == 0.0 and zero_fill(plain, 128, 128, 4096) == 0.0
    assert zero_fill("persistent/128x128x128/g8/w8/s3/k1/f", 128, 128, 128) == pytest.approx(4 * stage)
    assert zero_fill("tma/64x64x128/g8/w4/s4/k1/f", 128, 128, 128) == 0.0
    # misaligned A rows, not copied at this size: A's element-wise loads are synchronous (no stages), while B's
    # 16-byte copies beside them keep their four stages and zero-fill the two past the one K-step
    assert zero_fill(plain, 128, 128, 63) == pytest.approx(2 * stage / 2)
    assert zero_fill(plain, 128, 129, 63) == 0.0  # both operands element-wise: nothing prefetched
    # (B's 130-element rows: 4-byte vectors, A's 16-byte; 132: 8-byte; both operands 4-byte vectors at K = 66)
    assert zero_fill(plain, 128, 130, 64) == pytest.approx(2 * stage * (64 * 1 + 64 * 4) / 128)
    assert zero_fill(plain, 128, 132, 64) == pytest.approx(2 * stage * (64 * 1 + 64 * 2) / 128)
    assert zero_fill(plain, 130, 130, 66) == pytest.approx(stage * 4)  # 2 K-steps, 1 stage past them, all at 4 B
    # one 128x128 tile, one K-step, both operands 4-byte vectors: each stage past it is 256 warp-wide copies
    for stages in (3, 4):
        key = f"persistent/128x128x64/g8/w8/s{stages}/k1/f"
        assert zero_fill(key, 64, 66, 62) == pytest.approx((stages - 2) * 256 * copy)
        assert zero_fill(key, 64, 64, 64) == pytest.approx((stages - 2) * 64 * copy)  # 16-byte copies
    # a profile that did not measure it (the datasheet) has no term
    assert float(predict(Problem(128, 128, 64), _config(plain), H100).breakdown["zero_fill"]) == 0.0


def _one_sm(profile: Profile, rate: float) -> Profile:
    metrics = dict(profile.metrics)
    metrics["hbm_read_bandwidth_one_sm"] = Measurement(
        name="hbm_read_bandwidth_one_sm", value=rate, unit="B/s", method="test"
    )
    return dataclasses.replace(profile, metrics=metrics, origin=f"{profile.origin}+one_sm={rate}")


def test_a_k_step_streams_no_faster_than_one_sms_read_ceiling() -> None:
    """An asynchronous copy moves a K-step's panels through its SM at most at one SM's read rate
    (``hbm_read_bandwidth_one_sm``): every program's K-step takes at least its bytes at that rate, times the
    programs sharing the SM; scalar (misaligned) builds and profiles without the metric have no such term."""
    rate = 20e9
    slow = _one_sm(H100, rate)
    problem = Problem(128, 8192, 8192)
    for key in ("persistent/64x128x64/g8/w4/s4/k1", "persistent/128x128x64/g8/w8/s3/k1/f",
                "tma/128x256x64/g8/w8/s3/k1/f", "splitk/64x64x128/g8/w4/s4/k2"):  # fmt: skip
        config = _config(key)
        prediction = predict(problem, config, slow)
        resident = float(prediction.details["resident_per_sm"])
        step = (config.block_m + config.block_n) * config.block_k * 2 / rate
        assert float(prediction.breakdown["iter_total"]) >= resident * step * (1 - 1e-12)
        assert prediction.time_s > predict(problem, config, H100).time_s
    misaligned = Problem(128, 128, 63)  # A rows of 126 bytes, not copied at this size: element-wise loads
    config = _config("persistent/64x64x64/g8/w4/s4/k1")
    assert predict(misaligned, config, slow).time_s == predict(misaligned, config, H100).time_s


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 16384), st.integers(1, 16384), st.integers(1, 16384), st.floats(1.01, 8.0))
@example(321, 456, 600, 1.25)  # 24 tiles: Stream-K's only wave is a tail of 2-slice items (their own prologue)
def test_a_faster_one_sm_ceiling_never_slows_a_prediction(m: int, n: int, k: int, factor: float) -> None:
    problem = Problem(m, n, k)
    base = _one_sm(H100, 40e9)
    fast = _one_sm(H100, 40e9 * factor)
    for config in [p.config for p in rank(problem, base)[:5]]:
        assert predict(problem, config, fast).time_s <= predict(problem, config, base).time_s * (1 + 1e-12)


def test_a_fourth_stage_hides_what_a_third_does_not() -> None:
    """Each prefetched stage overlaps one more copy's wait (latency plus its bytes at one SM's rate): on the
    bundled H200 profile, 128x8192x8192 with persistent 128x128x64 w8 flattened tiles is predicted clearly
    faster with 4 stages than with 3 (swept: 58.4 against 72.9 us, reports/results/validate-llm-h200.json),
    where the former hide term (the chased latency alone over 0.4 per extra stage) priced them alike."""
    from pathlib import Path

    from theodolite.profile import load as load_profile

    h200 = load_profile(str(Path(__file__).resolve().parents[2] / "profiles" / "nvidia-h200.h5"))
    problem = Problem(128, 8192, 8192)
    three, four = (predict(problem, _config(f"persistent/128x128x64/g8/w8/s{s}/k1/f"), h200).time_s for s in (3, 4))
    assert three > 1.05 * four


def test_a_memory_bound_kernels_partial_last_wave_streams_at_its_own_sms_rate() -> None:
    """A weight stream (M = 8, K = 16384, nt) of 16x256x64 tiles: 132 tiles are one full wave of the H200's 132 SMs,
    HBM-bound; 8 tiles more stream on 8 SMs alone after it, at what those reach.  Measured (experiments/
    phase_roofline.py, phase-roofline-h200.json): 256.3 us for 132 tiles, 355.5 for 140.  One max of SM and memory
    time over the whole kernel priced 140 tiles at 1.06x 132 (their bytes); each phase's own max prices the last
    wave's stream."""
    from pathlib import Path

    from theodolite.profile import load as load_profile

    h200 = load_profile(str(Path(__file__).resolve().parents[2] / "profiles" / "nvidia-h200.h5"))
    config = _config("persistent/16x256x64/g8/w4/s4/k1")
    one, more, two = (predict(Problem(8, t * 256, 16384, layout="nt"), config, h200).time_s for t in (132, 140, 264))
    assert more > 1.3 * one  # measured 1.39x
    assert two < 2.05 * one  # two full waves: twice the bytes at the same bandwidth


def test_synchronous_warp_grid_matches_the_compiled_layouts() -> None:
    """Triton 3.6's mma v2 warpsPerCTA for the tiles under 64 rows (read from compiled TTGIR, sm_90)."""
    import numpy as np
    from theodolite.model.compute import sync_warp_grid

    compiled = {(16, 64, 4): (1, 4), (32, 64, 4): (1, 4), (32, 128, 4): (1, 4), (16, 128, 4): (1, 4),
                (32, 64, 8): (2, 4), (16, 256, 8): (1, 8), (32, 256, 8): (1, 8)}  # fmt: skip
    for (bm, bn, warps), grid in compiled.items():
        wm, wn = sync_warp_grid(np.array([bm]), np.array([bn]), np.array([warps]))
        assert (int(wm[0]), int(wn[0])) == grid, (bm, bn, warps)


def test_synchronous_tiles_read_a_once_per_warp_along_n() -> None:
    """A 16x64x128 tile with 4 warps moves 52 KB of shared memory per K-step (20 KB copied in, A's 4 KB read by
    each of the 4 warps, B's 16 KB once); two resident programs measured 0.48 us a step each on the H100, what
    52 KB at its shared-memory bandwidth takes (experiments/tile-steps-h100.json)."""
    import numpy as np
    from theodolite.model.compute import smem_time

    hw = hardware(H100, "bf16")
    one = np.array([1.0])
    t_sync = smem_time(16 * one, 64 * one, 128 * one, 4 * one, hw)[0]
    assert t_sync == pytest.approx(52 * 1024 / hw.smem_bandwidth)
    # the asynchronous path (64 rows and more) reads each operand once per instruction: 64x64x64, 32 KB
    t_async = smem_time(64 * one, 64 * one, 64 * one, 4 * one, hw)[0]
    assert t_async == pytest.approx(32 * 1024 / hw.smem_bandwidth)


def test_fp8_tiles_under_64_rows_multiply_as_fp16_after_a_conversion() -> None:
    """sm_90 SASS of fp8 splitk/16x64x512 w4: per warp and K-step 64 HMMA.16816.F32 (fp16, k16) and 256
    F2FP.F16.E4M3.UNPACK_B.  The model prices that K-step at the fp16 rate with those counts; 64-row tiles keep the
    fp8 rate, and bf16 is what it was."""
    from theodolite.model.compute import compute_time, conversion_time, mma_instructions

    one = np.array([1.0])
    fp8, fp16, bf16 = (hardware(H100, d) for d in ("fp8e4m3", "fp16", "bf16"))
    bm, bn, bk, warps = 16 * one, 64 * one, 512 * one, 4 * one
    assert mma_instructions(bm, bn, bk, warps, fp8)[0] == 64
    assert conversion_time(bm, bn, bk, warps, fp8)[0] * fp8.issue_rate == pytest.approx(4 * 256)
    synchronous = compute_time(bm, bn, bk, fp8, warps)[0]
    assert synchronous == pytest.approx(compute_time(bm, bn, bk, fp16, warps)[0] + 1024 / fp8.issue_rate)
    # 64 rows: the asynchronous path takes fp8 itself (twice fp16's rate), nothing converted
    wide = compute_time(64 * one, bn, bk, fp8, warps)[0]
    assert conversion_time(64 * one, bn, bk, warps, fp8)[0] == 0
    assert wide < compute_time(64 * one, bn, bk, fp16, warps)[0]
    assert conversion_time(bm, bn, 256 * one, warps, bf16)[0] == 0


def test_a_tile_wider_than_the_matrix_waits_as_long_as_one_that_fits() -> None:
    """The columns a tile wraps past N are L2 hits arriving with the step's misses: they must not shorten its
    latency.  dev190 (240x24x197): 16x64 and 16x128 tiles both cover N = 24 and fetch the same bytes per K-step, so
    they wait the same latency; diluted by the wrapped columns the 16x128 tile waited 7% less, and the H200's model
    picked it at 0.67 of 16x64's measured speed."""
    from pathlib import Path

    from theodolite.kernels.config import GemmConfig

    from theodolite.profile import load_profile

    h200 = load_profile(Path(__file__).resolve().parents[2] / "profiles" / "nvidia-h200.h5")
    assert hardware(h200, "bf16").hbm_latency_s > hardware(h200, "bf16").l2_latency_s  # a miss share matters
    problem = Problem(240, 24, 197)
    narrow = predict(problem, GemmConfig("persistent", 16, 64, 128, num_warps=4, num_stages=4), h200)
    wide = predict(problem, GemmConfig("persistent", 16, 128, 128, num_warps=4, num_stages=4), h200)
    assert narrow.details["concurrent"] == wide.details["concurrent"]
    assert wide.breakdown["iter_latency"] == pytest.approx(narrow.breakdown["iter_latency"], rel=1e-12)


def test_split_k_counts_only_the_slices_that_hold_k_steps() -> None:
    """Split-K slices are ceil(K-steps / split) steps long (kernels' splitk_kernel), so a split whose tail slices are
    empty runs ceil(K-steps / slice length) slices with work: 6 K-steps in 4 slices are 3 slices of 2, on 3 SMs.
    The empty ones still store a (zero) partial that the reduction reads: the fix-up follows the launched split."""
    profile = H100
    shape = Problem(64, 64, 6 * 128)  # one 64x64 tile, 6 K-steps of 128
    four = predict(shape, _config("splitk/64x64x128/g8/w4/s4/k4"), profile)
    two = predict(shape, _config("splitk/64x64x128/g8/w4/s4/k2"), profile)
    assert four.details["items"] == 3 and four.details["iterations"] == 2
    assert two.details["items"] == 2 and two.details["iterations"] == 3
    # 132 tiles x 3 live slices: one wave of 396 programs would be two per SM if the empty fourth slices counted
    wide = predict(Problem(64 * 12, 64 * 11, 6 * 128), _config("splitk/64x64x128/g8/w4/s4/k4"), profile)
    assert wide.details["items"] == 396
    # the reduction still reads all four partials: more than two slices' worth
    assert four.breakdown["fixup"] > two.breakdown["fixup"]


def test_a_cooperative_split_k_reduction_shares_the_chain(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where split-K reduces cooperatively (kernels' config.cooperative_reduction: 8 slices of 64x64 fp32 partials,
    one program per SM or fewer), each slice reads an eighth of every partial instead of the last arriver reading
    them all; the rest of the time is the same."""
    from pathlib import Path

    from theodolite.model import core

    from theodolite.profile.hdf5 import load_profile

    profile = load_profile(Path(__file__).resolve().parents[2] / "profiles" / "nvidia-h100-80gb-hbm3.h5")
    config = _config("splitk/64x64x128/g8/w4/s4/k8")
    problem = Problem(64 * 4, 64 * 4, 8 * 128 * 4)  # 16 tiles, 128 programs on 132 SMs
    coop = predict(problem, config, profile).breakdown["fixup"]
    monkeypatch.setattr(core, "COOP_MIN_SPLIT", 10**6)  # the last arriver's reduction
    last = predict(problem, config, profile).breakdown["fixup"]
    hw = hardware(profile, "bf16")
    chain = 8 * 64 * 64 * 4 * hw.splitk_reduce_cost / hw.sm_bandwidth
    assert chain > 1e-6 and last - coop == pytest.approx(chain * 7 / 8, rel=1e-6)


def test_a_composite_tile_prices_both_dots() -> None:
    """A composite tile (tma 128 x (128 + 32)): its output tile is 160 wide for waves and traffic, each part issues its
    own instructions, its second dot reads the A tile from shared memory once more, and it pays
    model_composite_iteration_overhead per K-step (the bundled H100 profile's fitted value)."""
    from pathlib import Path

    from theodolite.kernels.config import GemmConfig
    from theodolite.model import compute

    from theodolite.profile.hdf5 import load_profile

    measured = load_profile(str(Path(__file__).resolve().parents[2] / "profiles" / "nvidia-h100-80gb-hbm3.h5"))
    hw = hardware(measured, "bf16")
    table = table_for(measured, "bf16")
    i = table.index["tma/128x128+32x64/g8/w8/s5/k1"]
    assert GemmConfig.from_key(table.keys[i]).tile_n == 160
    assert table.bn[i] == 160 and table.elems[i] == 128 * 160
    bm, bk, warps = np.array([128.0]), np.array([64.0]), np.array([8.0])
    parts = compute.compute_time(bm, np.array([128.0]), bk, hw, warps)
    parts = parts + compute.compute_time(bm, np.array([32.0]), bk, hw, warps)
    assert table.compute_it[i] == pytest.approx(float(parts[0]))
    whole = compute.smem_time(bm, np.array([160.0]), bk, warps, hw)
    a_read = 128 * 64 * hw.element_bytes / hw.smem_bandwidth
    assert table.smem_it[i] == pytest.approx(float(whole[0]) + a_read)
    plain = table.index["tma/128x128x64/g8/w8/s4/k1"]
    assert hw.composite_iteration_overhead_s > 0.0
    assert table.it_extra[i] - table.it_extra[plain] == pytest.approx(hw.composite_iteration_overhead_s)


def test_a_loop_bound_by_its_streaming_absorbs_part_of_the_fill() -> None:
    """The prologue's prefetched steps cost their streaming, less the slack of a loop whose steps run at that streaming
    (``it_f`` above the rest of a step, ``other``); a loop bound by the rest absorbs nothing."""
    from theodolite.model.core import _prologue

    stream, steps, prefetch = 2e-7, 12, 7
    assert _prologue(steps, prefetch, 0.0, stream, it_f=stream, other=stream) == pytest.approx(7 * stream)
    slack = 0.05 * stream  # the steps run at the streaming, the rest 5% below it
    assert _prologue(steps, prefetch, 0.0, stream, it_f=stream, other=stream - slack) == pytest.approx(
        7 * stream - 12 * slack
    )
    assert _prologue(steps, prefetch, 0.0, stream, it_f=3 * stream, other=0.0) == 0.0  # all absorbed: none left
    assert _prologue(steps, prefetch, 0.0, 0.0, it_f=stream, other=stream) == 0.0  # element-wise: no prefetch


def test_pipeline_fill_charges_each_item_its_prefetched_steps_at_the_streaming_ceiling() -> None:
    """A work item's prologue requests its prefetched K-steps at once and they share the SM's copy path: each costs its
    bytes at one SM's streaming ceiling (TMA copies at theirs), only the steps the loop has, less what a loop bound by
    that streaming absorbs; element-wise operands prefetch nothing (one tile measured +0.10-0.16 us a stage on the
    H200, experiments/pipeline_fill.py)."""
    from pathlib import Path

    from theodolite.profile.hdf5 import load_profile

    profile = load_profile(Path(__file__).resolve().parents[2] / "profiles" / "nvidia-h200.h5")
    hw = hardware(profile, "bf16")

    def fill(key: str, m: int, n: int, k: int) -> float:
        return float(predict(Problem(m, n, k), _config(key), profile).breakdown["pipeline_fill"])

    step = (64 + 64) * 64 * 2 / hw.sm_stream_bandwidth  # one 64x64x64 bf16 K-step through one SM
    plain = "persistent/64x64x64/g8/w4/s4/k1"
    assert fill(plain, 64, 64, 12 * 64) == pytest.approx(3 * step)  # three prefetched steps, latency-bound loop
    assert fill(plain, 64, 64, 2 * 64) == pytest.approx(2 * step)  # the loop has two: the third is zero-filled
    assert fill(plain, 64, 64, 64) == pytest.approx(step)
    # its loop runs at or just above the streaming ceiling (the H200's shared-memory term ties it): a loop bound by that
    # streaming absorbs some of the fill, one bound by anything else none
    deep = "persistent/64x64x64/g8/w4/s8/k1"
    assert 0.8 * 7 * step < fill(deep, 64, 64, 12 * 64) <= 7 * step * (1 + 1e-9)
    assert fill(deep, 64, 64, 12 * 64) > fill(plain, 64, 64, 12 * 64)
    tma = "tma/64x128x64/g8/w4/s4/k1"  # TMA copies stream faster through an SM
    assert fill(tma, 64, 128, 12 * 64) == pytest.approx(
        3 * (64 + 128) * 64 * 2 / hw.sm_stream_bandwidth / hw.tma_stream_scale
    )
    assert fill(plain, 64, 65, 12 * 64) == 0.0 and fill(plain, 64, 64, 12 * 64 - 1) == 0.0  # element-wise operands
    # every item of a plain loop pays it (its fixed cost), a flattened loop once per program
    from theodolite.model.predict import ConfigTable, evaluate

    twins = ("persistent/64x64x128/g8/w4/s4/k1/f", "persistent/64x64x128/g8/w4/s4/k1")  # the flatten probe's pair
    table = ConfigTable(profile, "bf16", extra=tuple(_config(key) for key in twins))
    _, terms = evaluate(table, Problem(8192, 8192, 4 * 128), detail=True)
    flat, loop = (table.index[key] for key in twins)
    assert terms["pipeline_fill"][flat] == pytest.approx(terms["pipeline_fill"][loop])
    assert terms["pipeline_fill"][loop] > 0
    prologue = terms["pipeline_fill"][loop] - terms["prefetched"][loop]
    latency_hidden = (terms["fixed_per_item"][loop] - prologue) - terms["fixed_per_item"][flat]
    assert latency_hidden >= 0  # the flat loop's items also hide a share of their latency and overhead


def test_prefetched_k_steps_wait_no_share_of_the_latency_again() -> None:
    """A loop's first (stages - 1) K-steps were requested in its prologue, with its first: they arrive after the
    latency its fixed cost holds, so they do not wait a steady-state step's share of it (``hide``) again; the steps
    after them do.  Element-wise operands prefetch nothing."""
    from pathlib import Path

    from theodolite.model.predict import ConfigTable, evaluate

    from theodolite.profile.hdf5 import load_profile

    profile = load_profile(Path(__file__).resolve().parents[2] / "profiles" / "nvidia-h200.h5")
    table = ConfigTable(profile, "bf16")
    i = table.index["persistent/64x64x64/g8/w4/s4/k1"]  # three prefetched steps

    def terms(k: int) -> dict[str, float]:  # one tile: one work item, its loop latency-bound
        return {name: float(v[i]) for name, v in evaluate(table, Problem(64, 64, k), detail=True)[1].items()}

    one, three, many = terms(64), terms(3 * 64), terms(12 * 64)
    assert one["iter_latency"] > one["iter_compute"] and one["prefetched"] > 0  # waiting is what a step does
    assert three["prefetched"] == pytest.approx(3 * one["prefetched"], rel=1e-6)  # each prefetched step's wait
    assert many["prefetched"] == pytest.approx(three["prefetched"], rel=1e-6)  # and no more than the prologue's
    # the item's loop: its steps past the prologue wait their share, the three before them only their work
    assert many["sm_time"] - three["sm_time"] == pytest.approx(9 * many["iter_total"], rel=1e-6)
    assert three["sm_time"] - one["sm_time"] < 2 * one["iter_total"]  # two more prefetched steps, their fill too
    assert terms(64 * 3 - 1)["prefetched"] == 0.0  # an odd K: element-wise, synchronous loads


def test_resident_programs_take_their_items_fixed_work_in_turn() -> None:
    """What a work item runs outside its K loop (tile overhead, epilogue) issues from its SM's schedulers and store
    path, which the SM's resident programs share: per wave of items each program waits for the others' as well, so
    the fixed cost grows with the programs resident on an SM; the latency of the first loads overlaps.  Checked through
    the tile overhead's derivative, which nothing else in the item's fixed cost depends on."""
    from pathlib import Path

    from theodolite.model.calibration_fit import overrides
    from theodolite.model.predict import ConfigTable, evaluate

    from theodolite.profile.hdf5 import load_profile

    profile = load_profile(Path(__file__).resolve().parents[2] / "profiles" / "nvidia-h200.h5")
    key = "persistent/64x64x32/g8/w4/s2/k1"  # the tile probe's config, four programs per SM on the H200

    def fixed(problem: Problem, cycles: float) -> tuple[float, float]:
        with overrides({"model_tile_overhead": cycles}):
            table = ConfigTable(profile, "bf16")
            _, terms = evaluate(table, problem, detail=True)
        i = table.index[key]
        return float(terms["fixed_per_item"][i]), float(terms["#resident_per_sm"][i])

    crowded, alone = Problem(4096, 4096, 32), Problem(512, 512, 32)  # 4096 tiles; 64 tiles, one per SM
    (c1, resident), (c2, _) = fixed(crowded, 100.0), fixed(crowded, 1100.0)
    (a1, one), (a2, _) = fixed(alone, 100.0), fixed(alone, 1100.0)
    assert resident == 4 and one == 1
    assert (c2 - c1) == pytest.approx(4 * (a2 - a1))  # four programs' overheads per item, against its own
    assert a2 - a1 > 0
    # the epilogue's stores likewise: the crowded item's fixed cost exceeds the lone one's by more than the latency
    assert c1 - a1 > 3 * 64 * 64 * 2 / hardware(profile, "bf16").sm_bandwidth
