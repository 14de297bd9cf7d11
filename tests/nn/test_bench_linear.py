"""bench-linear: a CPU smoke run (interpreter, a tiny decoder) of the command end to end, and a tiny GPU run."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from theodolite.cli import main  # noqa: E402

PROJ = ["qkv", "o", "gate_up", "down"]
VERDICTS = {"wins", "pick", "bundle", "untimed"}
TINY = ["--layers", "2", "--ms", "1,8,16", "--repeats", "2", "--compile-layers", "1"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="the interpreter smoke run is for CPU-only machines")
def test_cpu_smoke_run_writes_rows_and_a_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    os.environ["TRITON_INTERPRET"] = "1"
    out = tmp_path / "bench.json"
    assert main(["bench-linear", "--out", str(out), *TINY, "--hidden", "32", "--ffn", "48", "--kv", "8"]) == 0
    result = json.loads(out.read_text())
    assert result["errors"] == {}
    assert [row["m"] for row in result["rows"]] == [1, 8, 16]
    assert all(row["max_rel_err"] < 1e-5 for row in result["rows"])
    assert result["projections"] == [["qkv", 32, 48], ["o", 32, 32], ["gate_up", 32, 96], ["down", 48, 32]]
    assert result["compile"]["graphs"] == {"torch": 1, "theodolite": 1}  # fullgraph, and M=8 reused M=16's graph
    assert result["compile"]["graphs_after_every_m"] == 4  # and M=1, which torch specializes: one more per side
    assert set(result["tokens_per_s"]["decode"]) == {"1", "8"}
    assert "torch / theodolite" in capsys.readouterr().out


def test_bad_ms_is_a_clean_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["bench-linear", "--ms", "8,x"])
    assert "comma-separated integers" in capsys.readouterr().err


@pytest.mark.gpu
def test_gpu_tiny_run(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    assert main(["bench-linear", "--out", str(out), *TINY]) == 0
    result = json.loads(out.read_text())
    assert result["errors"] == {}
    assert all(row["max_rel_err"] < 2e-2 for row in result["rows"])
    assert all(row["graph_theodolite_ms"] > 0 and row["compile_theodolite_ms"] > 0 for row in result["rows"])
    assert result["compile"]["graphs"] == {"torch": 1, "theodolite": 1}
    assert result["compile"]["graphs_after_every_m"] == 4
    assert result["host_us_per_call"]["theodolite.ops.linear"] > 0
    assert result["trace"]["theodolite"]["kernel_launches"] >= 8
    assert all(result["compiled_host_us"]["per_op_us"][side] > 0 for side in ("torch", "theodolite"))
    kernels = result["kernels"]
    assert [(r["m"], r["projection"]) for r in kernels] == [(m, p) for m in (1, 8, 16) for p in PROJ]
    assert all(r["torch_us"] > 0 and r["theodolite_us"] > 0 and r["verdict"] in VERDICTS for r in kernels)


@pytest.mark.gpu
def test_gpu_candidates_are_timed_at_a_candidate_m() -> None:
    """At an M of bench_kernels.CANDIDATE_MS the pick and the model's next configs are timed (the pick among them)."""
    from theodolite import bench_kernels

    torch.manual_seed(0)
    weights = [[torch.randn(512, 256, device="cuda", dtype=torch.bfloat16) * 0.06] for _ in range(2)]
    with torch.no_grad():
        rows = bench_kernels.projection_times(weights, [("p", 256, 512)], [32], top=3, progress=lambda _: None)
    (row,) = rows
    timed = [c for c in row["candidates"] if "us" in c]
    # the pick and the model's next two, then the best-ranked config of each variant not among them
    assert len(row["candidates"]) >= 3 and row["candidates"][0]["pick"] and row["candidates"][0]["key"] == row["pick"]
    assert not any(c["pick"] for c in row["candidates"][1:])
    assert timed and row["best_us"] == min(c["us"] for c in timed)


def test_verdict_tells_a_losing_pick_from_a_missing_config() -> None:
    from theodolite.bench_kernels import verdict

    assert verdict(torch_us=10.0, pick_us=9.5, best_us=None) == "wins"
    assert verdict(torch_us=10.0, pick_us=12.0, best_us=9.0) == "pick"  # a ranked candidate beats torch
    assert verdict(torch_us=10.0, pick_us=12.0, best_us=11.0) == "bundle"  # none of them does
    assert verdict(torch_us=10.0, pick_us=12.0, best_us=None) == "untimed"


def test_candidates_put_the_pick_first_then_the_models_ranking() -> None:
    os.environ["TRITON_INTERPRET"] = "1"
    from theodolite.kernels.launch import problem_of

    from theodolite import api, bench_kernels

    x, w = torch.randn(32, 256), torch.randn(512, 256)
    ranked = bench_kernels.candidates(x, w, top=4)
    pick = api.select_problem(problem_of(x, w.t(), None, "ieee")).config
    assert len(ranked) >= 4 and ranked[0][0] == pick and ranked[0][2]
    assert not any(is_pick for _, _, is_pick in ranked[1:])
    assert len({c.key for c, _, _ in ranked}) == len(ranked)
    assert [t for _, t, _ in ranked[1:4]] == sorted(t for _, t, _ in ranked[1:4])  # the model's next, fastest first
    extra = [c.variant for c, _, _ in ranked[4:]]  # then one of each variant the top four lack
    assert len(set(extra)) == len(extra) and not set(extra) & {c.variant for c, _, _ in ranked[:4]}
    from theodolite.model.predict import rank

    legal = {p.config.variant for p in rank(problem_of(x, w.t(), None, "ieee"), api.resolve(None))}
    assert {c.variant for c, _, _ in ranked} == legal and len(legal) > 1
