"""bench-linear: a CPU smoke run (interpreter, a tiny decoder) of the command end to end, and a tiny GPU run."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from theodolite.cli import main  # noqa: E402

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
