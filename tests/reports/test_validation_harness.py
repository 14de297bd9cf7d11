"""The validation harness on the CPU: summary figures with known answers; budget, shard, resume with fake timings."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import pytest
from theodolite.kernels.config import GemmConfig, KernelLimits, Problem, legal_configs

from theodolite.cli import main
from theodolite.profile.datasheet import h100_sxm
from theodolite.results import TORCH_KEY, Results, ShapeResult, load_results, save_results
from theodolite.validation import (
    FIXED_CONFIG,
    Harness,
    ModelPick,
    Shape,
    ValidateSettings,
    ValidationError,
    final_candidates,
    fixed_pick,
    load_shapes,
    merge_files,
    model_pick,
    nearest_config,
    parse_shard,
    run_validation,
    shard_of,
    summarize,
    summary_lines,
    time_final_round,
)

K1, K2, K3 = "persistent/128x128x64/g8/w8/s3/k1", "persistent/64x64x64/g8/w4/s4/k1", "tma/128x256x64/g8/w8/s3/k1"


def known_results() -> Results:
    a = ShapeResult(
        "a",
        1024,
        1024,
        1024,
        torch_ms=1.5,
        configs={K1: 1.0, K2: 2.0, K3: 4.0},
        model_pick=K1,
        model_predicted_ms={K1: 1, K2: 2, K3: 3},
        selection_us=10,
        peer_picks={"fixed": K3},
        autotune_wall_s=2.0,
    )
    b = ShapeResult(
        "b",
        16,
        4096,
        4096,
        torch_ms=1.0,
        configs={K1: 2.0, K2: 1.0, K3: None},
        model_pick=K1,
        model_predicted_ms={K1: 1, K2: 2, K3: 3},
        selection_us=20,
        peer_picks={"fixed": K1},
        errors={K3: "wrong result: max_rel_error=1.0"},
        autotune_wall_s=4.0,
    )
    c = ShapeResult(
        "c",
        4096,
        16,
        4096,
        torch_ms=2.5,
        configs={K1: 1.0, K2: 1.25, K3: 3.0},
        model_pick=K2,
        model_predicted_ms={K1: 3, K2: 2, K3: 1},
        selection_us=30,
    )
    return Results(device="fake", shapes=[a, b, c])


def test_summarize_known_answers(tmp_path: Path) -> None:
    path = save_results(known_results(), tmp_path / "r.json")
    s = summarize(load_results(path))
    assert s["shapes"] == 3 and s["shapes_with_pick"] == 3
    assert s["efficiency"]["geomean"] == pytest.approx(0.4 ** (1 / 3))
    assert s["efficiency"]["min"] == pytest.approx(0.5)
    assert s["efficiency"]["p5"] == pytest.approx(0.53)
    assert s["efficiency"]["hit_rate"] == pytest.approx(1 / 3)
    assert s["efficiency"]["within_5pct"] == pytest.approx(1 / 3)
    assert s["vs_torch"]["geomean"] == pytest.approx(1.5 ** (1 / 3))
    assert s["vs_torch"]["min"] == pytest.approx(0.5)
    assert s["best_vs_torch"]["geomean"] == pytest.approx((1.5 * 1.0 * 2.5) ** (1 / 3))
    assert s["selection_us"]["median"] == pytest.approx(20)
    assert s["spearman"]["median"] == pytest.approx(0.0)  # +1 (a) and -1 (c); b has 2 timed configs only
    assert s["spearman"]["min"] == pytest.approx(-1.0)
    assert s["autotune_s"]["total"] == pytest.approx(6.0)
    # the picks' predicted / measured: a 1 / 1.0, b 1 / 2.0, c 2 / 1.25
    assert s["absolute"] == pytest.approx({"p10": 0.6, "median": 1.0, "p90": 1.48})
    assert ("pick's predicted / measured time median / p10 / p90", "1.00 / 0.60 / 1.48") in summary_lines(s)
    assert s["peers"]["fixed"]["geomean"] == pytest.approx(math.sqrt(0.25 * 0.5))
    assert [w["name"] for w in s["worst"]] == ["b", "c", "a"]
    assert s["wrong_results"] == 1 and s["configs_timed"] == 8
    rows = {r["name"]: r for r in s["rows"]}
    assert rows["a"]["intensity"] == pytest.approx(2 * 1024**3 / (2 * 3 * 1024**2))


def test_summarize_empty_and_failed_pick() -> None:
    empty = summarize(Results(device="x"))
    assert empty["efficiency"]["geomean"] is None and empty["worst"] == []
    assert empty["absolute"]["median"] is None
    failed = ShapeResult("f", 64, 64, 64, configs={K1: 1.0, K2: None}, model_pick=K2)
    s = summarize(Results(device="x", shapes=[failed]))
    assert s["pick_failed"] == 1 and s["efficiency"]["min"] == 0.0


def test_final_round_decides_comparisons_where_it_holds_them() -> None:
    """Pick, best and torch.matmul from the side-by-side final round; the sweep where the pick is not in it."""
    shape = ShapeResult(
        "f", 512, 512, 512, torch_ms=1.0, configs={K1: 1.0, K2: 1.1, K3: 2.0}, model_pick=K2,
        peer_picks={"fixed": K3}, final_ms={TORCH_KEY: 1.2, K1: 1.5, K2: 1.2},
    )  # fmt: skip
    row = summarize(Results(device="x", shapes=[shape]))["rows"][0]
    assert row["source"] == "final" and row["efficiency"] == pytest.approx(1.0)  # the sweep said 1.0/1.1
    assert row["best_key"] == K2 and row["best_ms"] == pytest.approx(1.2)
    assert row["vs_torch"] == pytest.approx(1.0) and row["best_vs_torch"] == pytest.approx(1.0)
    assert row["peers"]["fixed"] == pytest.approx(1.0 / 2.0)  # K3 not in the final round: the sweep's ratio
    shape.model_pick = K3  # e.g. a refit picks outside the final round: sweep figures, said so
    row = summarize(Results(device="x", shapes=[shape]))["rows"][0]
    assert row["source"] == "sweep" and row["efficiency"] == pytest.approx(0.5)
    assert row["vs_torch"] == pytest.approx(0.5)
    s = summarize(Results(device="x", shapes=[shape]))
    assert s["final_round"] == 0


def test_final_candidates_are_the_best_few_the_picks_and_the_peers() -> None:
    keys = [c.key for c in legal_configs(Problem(1024, 1024, 1024), KernelLimits.from_profile(h100_sxm()))][:12]
    configs: dict[str, float | None] = {key: 1.0 + i for i, key in enumerate(keys)}
    configs[keys[2]] = None  # failed in the sweep: never re-timed
    shape = ShapeResult(
        "c", 1024, 1024, 1024, configs=configs, model_pick=keys[9],
        model_predicted_ms={key: 20.0 - i for i, key in enumerate(keys)}, peer_picks={"fixed": keys[7], "nv": keys[0]},
    )  # fmt: skip
    chosen = final_candidates(shape, top=4, predicted=3)
    assert chosen[:4] == [keys[0], keys[1], keys[3], keys[4]]  # the four fastest that ran
    assert keys[9] in chosen and keys[11] in chosen and keys[10] in chosen and keys[7] in chosen
    assert keys[2] not in chosen and len(chosen) == len(set(chosen)) == 8


def test_a_failing_final_round_is_recorded_not_raised() -> None:
    shape = ShapeResult("e", 64, 64, 64, configs={K1: 1.0}, model_pick=K1)

    def broken(_shape: Shape, _keys: list[str]) -> tuple[dict[str, float], dict[str, str]]:
        raise RuntimeError("CUDA out of memory")

    time_final_round(shape, broken)
    assert shape.final_ms == {} and "out of memory" in shape.errors["@final"]
    time_final_round(shape, lambda _s, keys: ({TORCH_KEY: 1.0, **{k: 0.5 for k in keys}}, {K2: "wrong result"}))
    assert "@final" not in shape.errors and shape.errors["@final " + K2] == "wrong result"
    assert shape.final_ms == {TORCH_KEY: 1.0, K1: 0.5}


# ---------------------------------------------------------------- harness bookkeeping


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def fake_harness(clock: FakeClock, measured: list[str], seconds: float = 10.0) -> Harness:
    profile = h100_sxm()
    limits = KernelLimits.from_profile(profile)

    def measure(shape: Shape, configs: list[GemmConfig]) -> ShapeResult:
        measured.append(shape.name)
        clock.now += seconds
        times = {c.key: 1.0 + 0.01 * i for i, c in enumerate(configs)}
        return ShapeResult(
            shape.name, shape.m, shape.n, shape.k, shape.dtype, shape.layout, torch_ms=1.1, configs=times
        )

    def pick(problem: Problem, profile: object) -> ModelPick:
        legal = legal_configs(problem, limits, profile)
        return ModelPick(legal[1].key, {c.key: float(i) for i, c in enumerate(legal)}, "compute", 5.0)

    return Harness(profile, limits, measure, pick=pick, clock=clock, log=lambda _m: None)


SHAPES = [Shape(f"s{i}", 256 * (i + 1), 512, 1024) for i in range(5)]


@pytest.mark.parametrize("name", ["r.json", "r.json.gz"])  # a compressed results file resumes alike
def test_budget_stops_then_resume_finishes(tmp_path: Path, name: str) -> None:
    clock, measured = FakeClock(), []
    out = tmp_path / name
    harness = fake_harness(clock, measured)
    results = run_validation(SHAPES, ValidateSettings(peers=("fixed",), budget_s=25), harness, out)
    assert measured == ["s0", "s1"]  # the third would end at 30s > 25s
    saved = load_results(out)
    assert out.read_bytes()[:2] == (b"\x1f\x8b" if name.endswith(".gz") else b"{\n")
    assert [s.name for s in saved.shapes] == ["s0", "s1"] and saved.settings["incomplete"] is True
    assert saved.settings["stopped_for_budget"] is True
    first = saved.shapes[0]
    assert first.model_pick and first.model_bottleneck == "compute" and first.selection_us == 5.0
    assert first.peer_picks["fixed"] == FIXED_CONFIG.key
    assert results.shapes[0].configs[first.model_pick] is not None
    results = run_validation(SHAPES, ValidateSettings(peers=("fixed",), resume=True), harness, out)
    assert measured == ["s0", "s1", "s2", "s3", "s4"]  # nothing measured twice
    assert [s.name for s in load_results(out).shapes] == [s.name for s in SHAPES]
    assert load_results(out).settings["incomplete"] is False
    assert summarize(results)["efficiency"]["geomean"] == pytest.approx(
        math.exp(sum(math.log(1.0 / 1.01) for _ in SHAPES) / 5)
    )


def test_shards_cover_every_shape_once_and_merge(tmp_path: Path) -> None:
    assert parse_shard(None) == (0, 1) and parse_shard("1/3") == (1, 3)
    for bad in ("3/3", "a/b", "1", "-1/2", "0/0"):
        with pytest.raises(ValidationError):
            parse_shard(bad)
    parts = [shard_of(SHAPES, i, 3) for i in range(3)]
    assert sorted(s.name for p in parts for s in p) == sorted(s.name for s in SHAPES)
    clock, measured = FakeClock(), []
    files = []
    for i in range(2):
        out = tmp_path / f"shard{i}.json"
        run_validation(SHAPES, ValidateSettings(peers=(), shard=(i, 2)), fake_harness(clock, measured), out)
        files.append(out)
    assert sorted(measured) == sorted(s.name for s in SHAPES)
    with pytest.raises(ValidationError, match="shard"):
        run_validation(SHAPES, ValidateSettings(shard=(1, 2), resume=True), fake_harness(clock, []), files[0])
    with pytest.raises(ValidationError, match="holds suite llm, not square"):
        run_validation(
            SHAPES, ValidateSettings(suite="square", shard=(0, 2), resume=True), fake_harness(clock, []), files[0]
        )
    merged = merge_files(files, tmp_path / "all.json")
    assert sorted(s.name for s in merged.shapes) == sorted(s.name for s in SHAPES)
    assert merged.settings["shapes_total"] == len(SHAPES)
    # a re-measurement of some shapes replaces them (the later file wins) and does not add to the total
    again = tmp_path / "again.json"
    run_validation(SHAPES[:2], ValidateSettings(peers=()), fake_harness(clock, []), again)
    marked = load_results(again)
    for shape in marked.shapes:
        shape.torch_ms = 123.0  # tells the re-measured entries apart
    save_results(marked, again)
    remeasured = merge_files([tmp_path / "all.json", again], tmp_path / "all3.json")
    assert remeasured.settings["shapes_total"] == len(SHAPES) and len(remeasured.shapes) == len(SHAPES)
    names = {s.name for s in SHAPES[:2]}
    assert [s.torch_ms == 123.0 for s in remeasured.shapes] == [s.name in names for s in remeasured.shapes]
    assert main(["validate", "--merge", *map(str, files), "-o", str(tmp_path / "all2.json")]) == 0
    assert main(["validate", "--summary", str(tmp_path / "all2.json")]) == 0


def test_picks_map_onto_legal_configs() -> None:
    profile = h100_sxm()
    limits = KernelLimits.from_profile(profile)
    problem = Problem(4096, 4096, 4096)
    legal = legal_configs(problem, limits, profile)
    assert fixed_pick(problem, legal) == FIXED_CONFIG
    target = {"block_m": 256, "block_n": 128, "block_k": 64, "num_warps": 8, "num_stages": 4, "split_k": 1}
    assert nearest_config(target, legal, ("persistent",)).key == "persistent/256x128x64/g8/w8/s4/k1"
    small = Problem(16, 64, 8192)
    target = {"block_m": 16, "block_n": 64, "block_k": 128, "num_warps": 4, "num_stages": 4, "split_k": 8}
    assert nearest_config(target, legal_configs(small, limits, profile), ("splitk",)).split_k == 8


def test_nvmmh_peer_on_the_cpu() -> None:
    pytest.importorskip("nvMatmulHeuristics")
    from theodolite.validation import NvmmhPeer

    assert NvmmhPeer.gpu_for("NVIDIA H100 80GB HBM3") == "H100_SXM"
    assert NvmmhPeer.gpu_for("NVIDIA H200") == "H200_SXM"
    peer = NvmmhPeer("NVIDIA H100 80GB HBM3")
    profile = h100_sxm()
    limits = KernelLimits.from_profile(profile)
    for m, n, k in ((4096, 4096, 4096), (16, 6144, 4096)):
        problem = Problem(m, n, k)
        legal = legal_configs(problem, limits, profile)
        answer = peer.answer(problem)
        assert answer["block_m"] >= 16 and answer["num_warps"] >= 1
        assert peer.pick(problem, legal) in legal


def test_model_pick_is_what_select_picks_and_predictions_come_from_rank(monkeypatch: pytest.MonkeyPatch) -> None:
    import theodolite.model as model

    import theodolite.api as api

    profile = h100_sxm()
    problem = Problem(512, 512, 512)
    picked = model_pick(problem, profile)
    expected = api.select(512, 512, 512, profile=profile)
    assert expected.config.key == api._select_problem(problem, profile).config.key
    assert picked.error is None and picked.key == expected.config.key
    assert picked.bottleneck == expected.bottleneck and picked.selection_us is not None and picked.selection_us > 0
    # the fast path and the full ranking agree on the winner, and every ranked config has a prediction
    ranked = model.rank(problem, profile)
    assert min(ranked, key=lambda p: p.time_s).config.key == picked.key
    assert set(picked.predicted_ms) == {p.config.key for p in ranked if p.time_s == p.time_s}

    limits = KernelLimits.from_profile(profile)
    legal = legal_configs(problem, limits, profile)
    predictions = [SimpleNamespace(config=c, time_s=1e-5 * (i + 1), bottleneck="cache") for i, c in enumerate(legal)]
    monkeypatch.setattr(model, "rank", lambda p, prof, variants=None: predictions, raising=False)
    assert model_pick(problem, profile).predicted_ms[legal[1].key] == pytest.approx(0.02)

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(api, "select", broken)
    assert "boom" in (model_pick(problem, profile).error or "")


def test_load_shapes_and_cli_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    csv = tmp_path / "s.csv"
    csv.write_text("name,M,N,K,dtype\nx,64,128,256,fp16\ny,32,32,32\n")
    shapes = load_shapes(str(csv))
    assert [(s.name, s.dtype) for s in shapes] == [("x", "fp16"), ("y", "bf16")]
    assert len(load_shapes("random:7:1")) == 7
    for argv, message in (
        (["validate", "--shard", "2/2"], "zero-based"),
        (["validate", "--peers", "fixed,magic"], "unknown peer"),
        (["validate", "--shapes", "no-such-suite"], "no shape suite"),
        (["validate", "--budget-s", "0"], "positive"),
        (["validate", "--merge", str(tmp_path / "x.json")], "--output"),
    ):
        assert main(argv) == 2
        assert message in capsys.readouterr().err
    import torch

    if not torch.cuda.is_available():
        assert main(["validate", "--shapes", "square"]) == 2
        assert "needs a GPU" in capsys.readouterr().err


FAKE_FLOORS = {"flushed_ms": 0.003, "graph_ms": 0.0007, "l2_bytes": 50.0 * 2**20}


@pytest.fixture
def fake_gpu(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """torch sees an H100 and the timing is a formula; everything else (model, nvmmh, files) is real."""
    import torch

    import theodolite.validation as validation

    measured: list[str] = []

    def fake_gpu_measure(settings, limits, profile, log):  # noqa: ANN001, ANN202
        def measure(shape: Shape, configs: list[GemmConfig]) -> ShapeResult:
            measured.append(shape.name)
            times = {c.key: 0.01 * (1 + (i * 7919) % 13) for i, c in enumerate(configs)}
            return ShapeResult(shape.name, shape.m, shape.n, shape.k, torch_ms=0.02, configs=times)

        return measure

    def fake_gpu_final(settings):  # noqa: ANN001, ANN202
        def final(shape: Shape, keys: list[str]) -> tuple[dict[str, float], dict[str, str]]:
            measured.append("final " + shape.name)
            return {TORCH_KEY: 0.02, **{key: 0.015 for key in keys}}, {}

        return final

    monkeypatch.setattr(validation, "gpu_final", fake_gpu_final)
    monkeypatch.setattr(validation, "gpu_floors", lambda settings: lambda: dict(FAKE_FLOORS))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(validation, "gpu_measure", fake_gpu_measure)
    return measured


def test_validate_cli_end_to_end_with_fake_gpu(fake_gpu: list[str], tmp_path: Path, capsys) -> None:  # noqa: ANN001
    """The whole CLI path (real model, real nvMatmulHeuristics, real files) with only the timing faked."""
    measured = fake_gpu
    out = tmp_path / "v.json"
    peers = "fixed,nvmmh" if _has_nvmmh() else "fixed"
    argv = ["validate", "--shapes", "square", "--profile", "datasheet:h100-sxm", "--no-precompile", "--peers", peers]
    assert main([*argv, "--shard", "0/2", "--no-final", "-o", str(out)]) == 0
    assert measured == ["square256", "square1024", "square4096", "square16384"]
    assert main(["validate", "--final", str(out), "--no-precompile", "-o", str(out)]) == 0
    assert measured[4:] == ["final square256", "final square1024", "final square4096", "final square16384"]
    results = load_results(out)
    assert all(s.final_ms[TORCH_KEY] == 0.02 and s.model_pick in s.final_ms for s in results.shapes)
    assert results.settings["final_round"]["shapes"] == 4
    assert summarize(results)["final_round"] == 4
    assert summarize(results)["efficiency"]["min"] == pytest.approx(1.0)  # ties in the final round
    del measured[4:]
    assert results.settings["shard"] == "0/2" and not results.settings["incomplete"]
    assert results.settings["timing_floor"] == FAKE_FLOORS  # the empty kernel in both timing modes, kept
    first = results.shapes[0]
    assert first.model_pick in first.configs, first.errors.get("@model")
    assert first.model_predicted_ms and first.selection_us
    assert set(first.peer_picks) == set(peers.split(","))
    assert "selection efficiency" in capsys.readouterr().out
    assert main([*argv, "--shard", "0/2", "-o", str(out), "--resume"]) == 0
    assert len(measured) == 4  # nothing left to do
    assert main(["report", "--results", str(out), "-o", str(tmp_path), "--profile", "datasheet:h100-sxm"]) == 0
    assert "-bound (" in (tmp_path / "v.html").read_text()  # the worst picks explained by the model


def test_final_round_in_shards_merges_back(fake_gpu: list[str], tmp_path: Path) -> None:
    """``--final FILE --shard i/n`` re-times every n-th shape from i into its own file, and ``--merge`` joins them
    into the whole file with every shape's final round (several GPUs share one final round)."""
    measured = fake_gpu
    sweep, parts = tmp_path / "v.json", [tmp_path / "f0.json", tmp_path / "f1.json"]
    argv = ["validate", "--shapes", "square", "--profile", "datasheet:h100-sxm", "--no-precompile", "--peers", ""]
    assert main([*argv, "--no-final", "-o", str(sweep)]) == 0
    names = [s.name for s in load_results(sweep).shapes]
    del measured[:]
    for index, part in enumerate(parts):
        final = ["validate", "--final", str(sweep), "--shard", f"{index}/2", "--no-precompile"]
        assert main([*final, "-o", str(part)]) == 0
        assert [s.name for s in load_results(part).shapes] == names[index::2]
    assert sorted(measured) == sorted("final " + name for name in names)  # each shape re-timed once
    merged = tmp_path / "merged.json"
    assert main(["validate", "--merge", *map(str, parts), "-o", str(merged)]) == 0
    results = load_results(merged)
    assert sorted(s.name for s in results.shapes) == sorted(names)
    assert all(s.final_ms[TORCH_KEY] == 0.02 for s in results.shapes)
    assert results.settings["final_round"]["shapes"] == len(names)
    assert results.settings["shapes_total"] == len(names)  # each part carries the sweep's total: counted once
    assert "final_shard" not in results.settings


def _has_nvmmh() -> bool:
    try:
        import nvMatmulHeuristics  # noqa: F401
    except ImportError:
        return False
    return True


def test_bench_shape_signature_is_what_the_harness_calls() -> None:
    """gpu_measure calls kernels.benchmark.bench_shape positionally: catch a changed signature on the CPU."""
    import inspect

    from theodolite.kernels import benchmark

    names = list(inspect.signature(benchmark.bench_shape).parameters)
    assert names[:8] == ["name", "m", "n", "k", "settings", "limits", "timer", "profile"]
    fields = set(inspect.signature(benchmark.BenchSettings).parameters)
    assert {"dtype", "layout", "config_keys", "rep_ms", "max_reps", "precompile"} <= fields
    assert list(inspect.signature(benchmark.make_inputs).parameters)[:6] == ["m", "n", "k", "dtype", "layout", "device"]


def test_a_shape_that_fails_to_measure_does_not_stop_the_sweep(tmp_path: Path) -> None:
    clock, measured = FakeClock(), []
    harness = fake_harness(clock, measured)
    inner = harness.measure

    def flaky(shape: Shape, configs: list[GemmConfig]) -> ShapeResult:
        if shape.name == "s1":
            raise RuntimeError("CUDA out of memory")
        return inner(shape, configs)

    harness.measure = flaky
    results = run_validation(SHAPES[:3], ValidateSettings(peers=()), harness, tmp_path / "r.json")
    assert [s.name for s in results.shapes] == ["s0", "s1", "s2"]
    assert "out of memory" in results.shapes[1].errors["@measure"]
    s = summarize(results)
    assert s["shapes"] == 3 and s["config_errors"] == 0 and s["efficiency"]["min"] is not None


def test_peers_added_after_the_sweep(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The GPU machine may lack nvMatmulHeuristics: its picks map onto configs already timed, so add them later."""
    clock = FakeClock()
    out = tmp_path / "r.json"
    run_validation(SHAPES[:3], ValidateSettings(peers=()), fake_harness(clock, []), out)
    assert all(not s.peer_picks for s in load_results(out).shapes)
    peers = "fixed,nvmmh" if _has_nvmmh() else "fixed"
    assert main(["validate", "--add-peers", str(out), "--peers", peers]) == 0
    shapes = load_results(out).shapes
    for shape in shapes:
        assert set(shape.peer_picks) == set(peers.split(","))
        assert all(key in shape.configs for key in shape.peer_picks.values())
    assert "peer fixed" in capsys.readouterr().out


def test_validate_without_nvmmh_package_goes_on(fake_gpu: list[str], tmp_path: Path, monkeypatch, capsys) -> None:  # noqa: ANN001
    import theodolite.validation as validation

    def missing(device_name: str) -> None:
        raise ValidationError("peer nvmmh needs the nvMatmulHeuristics package (No module named 'x')")

    monkeypatch.setattr(validation, "NvmmhPeer", missing)
    out = tmp_path / "v.json"
    argv = ["validate", "--shapes", "square", "--profile", "datasheet:h100-sxm", "--no-precompile", "-o", str(out)]
    assert main([*argv, "--peers", "fixed,nvmmh", "--budget-s", "3600"]) == 0
    assert "--add-peers" in capsys.readouterr().out
    assert all(set(s.peer_picks) == {"fixed"} for s in load_results(out).shapes)
    assert len(fake_gpu) == 14  # seven shapes, each swept and then timed in the final round


def test_score_the_model_on_a_bench_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A bench file timed every legal config: the model's picks are scored on it on the CPU."""
    profile = h100_sxm()
    limits = KernelLimits.from_profile(profile)
    shapes = []
    for name, m, n, k in (("a", 4096, 4096, 4096), ("b", 16, 6144, 4096)):
        legal = legal_configs(Problem(m, n, k), limits, profile)
        times = {c.key: 0.1 + 0.001 * i for i, c in enumerate(legal)}
        shapes.append(ShapeResult(name, m, n, k, torch_ms=0.1, configs=times))
    bench = save_results(Results(device="NVIDIA H100 80GB HBM3", command="bench", shapes=shapes), tmp_path / "b.json")
    out = tmp_path / "v.json"
    argv = ["validate", "--from-results", str(bench), "--profile", "datasheet:h100-sxm", "--peers", "fixed"]
    assert main([*argv, "-o", str(out)]) == 0
    scored = load_results(out)
    assert scored.profile_fingerprint == profile.fingerprint
    for shape in scored.shapes:
        assert shape.model_pick in shape.configs, shape.errors
        assert 0 < len(shape.model_predicted_ms) <= len(shape.configs) and shape.peer_picks["fixed"] in shape.configs
    assert "selection efficiency" in capsys.readouterr().out
    assert load_results(bench).shapes[0].model_pick is None  # the bench file itself is left alone


def test_summary_prints_where_selection_loses() -> None:
    import io

    from theodolite.validation import print_summary, recorded_picks, shape_summary

    results = known_results()
    picks = recorded_picks([(shape, shape_summary(shape)) for shape in results.shapes])
    assert [(p.pick, p.best) for p in picks] == [(K1, K1), (K1, K2), (K2, K1)]
    assert [p.efficiency for p in picks] == pytest.approx([1.0, 0.5, 0.8])
    out = io.StringIO()
    print_summary(results, out)
    text = out.getvalue()
    assert "where selection loses" in text
    # both missed picks are persistent beside persistent: one group, the whole loss
    row = next(line for line in text.splitlines() if "persistent -> persistent" in line)
    assert "100.0%" in row and f"{-math.log(0.5) - math.log(0.8):.3f}" in row


class _InProcessShard:
    """A shard's validate process run in this one (the fake GPU's timings): finished when spawned."""

    def __init__(self, command: list[str]):
        self.code = main(command[3:])

    def poll(self) -> int:
        return self.code

    def wait(self) -> int:
        return self.code


def _two_gpus(monkeypatch: pytest.MonkeyPatch, names: tuple[str, str]) -> list[tuple[list[str], str]]:
    import sys

    from theodolite.commands import calibrate
    from theodolite.validation import devices

    spawned: list[tuple[list[str], str]] = []

    def spawn(command: list[str], env: dict[str, str], log: Path) -> _InProcessShard:
        assert command[:4] == [sys.executable, "-m", "theodolite", "validate"] and log.name.endswith(".log")
        spawned.append((command, env["CUDA_VISIBLE_DEVICES"]))
        return _InProcessShard(command)

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(calibrate, "devices", lambda: [(name, "sm_90") for name in names])
    monkeypatch.setattr(devices, "spawn", spawn)
    return spawned


def test_all_devices_runs_a_shard_per_gpu_and_resumes_a_single_gpu_file(
    fake_gpu: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--all-devices``: GPU i sweeps shard i/n into its own file, the files merge into -o (then go); with
    ``--resume`` a file begun on one GPU seeds the shards, and only its missing shapes are timed."""
    from theodolite.validation.devices import seed_shards, shard_path

    spawned = _two_gpus(monkeypatch, ("NVIDIA H100 80GB HBM3",) * 2)
    out = tmp_path / "v.json.gz"
    argv = ["validate", "--shapes", "square", "--profile", "datasheet:h100-sxm", "--no-precompile", "--peers", "fixed"]
    assert main([*argv, "--no-final", "--all-devices", "-o", str(out)]) == 0
    suite = [s.name for s in load_shapes("square")]
    assert sorted(fake_gpu) == sorted(suite)  # each shape timed once, over the two GPUs
    assert [(c[c.index("--shard") + 1], gpu) for c, gpu in spawned] == [("0/2", "0"), ("1/2", "1")]
    assert all("--no-final" in c and "--resume" in c for c, _ in spawned)
    merged = load_results(out)
    assert sorted(s.name for s in merged.shapes) == sorted(suite)
    assert merged.settings["shapes_total"] == len(suite) and "shard" not in merged.settings
    assert not list(tmp_path.glob("*shard*")), "shard files and logs are removed once merged"
    assert shard_path(out, 1, 2).name == "v.shard1of2.json.gz"

    # a sweep begun on one GPU (shard 0/1), stopped after some shapes, goes on over two
    single = tmp_path / "single.json"
    fake_gpu.clear()
    assert main([*argv, "--no-final", "-o", str(single)]) == 0
    partial = load_results(single)
    partial.shapes = partial.shapes[:3]
    partial.settings["incomplete"] = True
    save_results(partial, single)
    seeded = [load_results(p) for p in seed_shards(tmp_path / "single.json", load_shapes("square"), 2, True)]
    assert [s.settings["wall_s"] for s in seeded] == [partial.settings["wall_s"], 0.0]  # merged, counted once
    assert sorted(x.name for s in seeded for x in s.shapes) == sorted(x.name for x in partial.shapes)
    for path in tmp_path.glob("single.shard*"):
        path.unlink()
    by_hand = tmp_path / "by-hand.json"  # the same by hand: a whole-suite file (shard 0/1) resumes as shard 1/2
    save_results(partial, by_hand)
    fake_gpu.clear()
    assert main([*argv, "--no-final", "--shard", "1/2", "--resume", "-o", str(by_hand)]) == 0
    assert (
        sorted(fake_gpu) == sorted(n for i, n in enumerate(suite) if i % 2 and i >= 3)
        and load_results(by_hand).settings["shard"] == "1/2"
    )
    fake_gpu.clear()
    assert main([*argv, "--no-final", "--all-devices", "--resume", "-o", str(single)]) == 0
    assert sorted(fake_gpu) == sorted(suite[3:])
    resumed = load_results(single)
    assert sorted(s.name for s in resumed.shapes) == sorted(suite)
    assert resumed.settings["shapes_total"] == len(suite)


def test_all_devices_refuses_mixed_gpus_and_its_own_shard_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    spawned = _two_gpus(monkeypatch, ("NVIDIA H100 80GB HBM3", "NVIDIA H200"))
    out = str(tmp_path / "v.json")
    assert main(["validate", "--shapes", "square", "--all-devices", "-o", out]) == 2
    assert "not one model" in capsys.readouterr().err and not spawned
    assert main(["validate", "--shapes", "square", "--all-devices", "--shard", "0/2", "-o", out]) == 2
    assert "drop --shard" in capsys.readouterr().err


def test_all_devices_says_why_a_shard_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from theodolite.validation import devices

    _two_gpus(monkeypatch, ("NVIDIA H200",) * 2)

    class Failed:
        def poll(self) -> int:
            return 3

        wait = poll

    def spawn(command: list[str], env: dict[str, str], log: Path) -> Failed:
        log.write_text(f"starting on GPU {env['CUDA_VISIBLE_DEVICES']}\nout of memory on this GPU\n")
        return Failed()

    monkeypatch.setattr(devices, "spawn", spawn)
    assert main(["validate", "--shapes", "square", "--all-devices", "-o", str(tmp_path / "v.json")]) == 2
    err = capsys.readouterr().err
    assert "shard 1/2 failed (exit 3): starting on GPU 1 | out of memory on this GPU" in err
    assert "no shard wrote a results file" in err and (tmp_path / "v.shard0of2.json.log").is_file()


def test_all_devices_shares_a_final_round(fake_gpu: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--final FILE --all-devices``: GPU i re-times every n-th shape from i, the parts merge into -o with every
    shape's final round and the sweep's total counted once."""
    spawned = _two_gpus(monkeypatch, ("NVIDIA H100 80GB HBM3",) * 2)
    sweep = tmp_path / "v.json"
    argv = ["validate", "--shapes", "square", "--profile", "datasheet:h100-sxm", "--no-precompile", "--peers", ""]
    assert main([*argv, "--no-final", "-o", str(sweep)]) == 0
    names = [s.name for s in load_results(sweep).shapes]
    fake_gpu.clear()
    final = ["validate", "--final", str(sweep), "--no-precompile", "--all-devices", "-o", str(sweep)]
    assert main(final) == 0
    assert sorted(fake_gpu) == sorted("final " + name for name in names)  # each shape re-timed once
    assert all("--final" in c and "--resume" not in c for c, _ in spawned)
    results = load_results(sweep)
    assert sorted(s.name for s in results.shapes) == sorted(names)
    assert all(s.final_ms[TORCH_KEY] == 0.02 for s in results.shapes)
    assert results.settings["shapes_total"] == len(names) and "final_shard" not in results.settings
    assert not list(tmp_path.glob("*shard*"))


def test_default_peers_leave_out_a_peer_whose_package_is_missing(monkeypatch: pytest.MonkeyPatch, capsys) -> None:  # noqa: ANN001
    """``--peers`` left out: fixed always, nvmmh only where nvMatmulHeuristics imports (a note says so); asked for by
    name without its package, nvmmh stays an error that names the package."""
    import importlib.util

    from theodolite.commands.validate import default_peers
    from theodolite.validation.peers import NvmmhPeer

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "nvMatmulHeuristics" else real(name, *a)
    )
    assert default_peers() == "fixed"
    assert "nvmmh left out" in capsys.readouterr().err
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object())
    assert default_peers() == "fixed,nvmmh"
    if not _has_nvmmh():
        with pytest.raises(ValidationError, match="nvMatmulHeuristics"):
            NvmmhPeer("H100")
