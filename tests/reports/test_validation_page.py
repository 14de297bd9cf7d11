"""The model-validation page renders from a results file: summary, plots, where selection loses, worst picks."""

from __future__ import annotations

import base64
import io
import re
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

from theodolite.cli import main  # noqa: E402
from theodolite.results import Results, ShapeResult, save_results  # noqa: E402

K = [f"persistent/{m}x{n}x64/g8/w4/s4/k1" for m, n in ((64, 64), (128, 64), (64, 128), (128, 128))]


def _results(incomplete: bool = False) -> Results:
    shapes = []
    for i in range(12):
        m, n, k = 64 * (i + 1), 4096, 512 * (1 + i % 3)
        times = {key: 0.1 * (1 + 0.3 * ((i + j) % 4)) for j, key in enumerate(K)}
        predicted = {key: 0.09 * (1 + 0.25 * ((i + j) % 4)) for j, key in enumerate(K)}
        shapes.append(
            ShapeResult(
                f"s{i}",
                m,
                n,
                k,
                torch_ms=0.12,
                configs=times,
                model_pick=K[i % 4],
                model_predicted_ms=predicted,
                model_bottleneck=("cache", "compute")[i % 2],
                selection_us=40.0,
                peer_picks={"fixed": K[3], "nvmmh": K[1]},
                autotune_wall_s=3.0,
            )
        )
    return Results(
        device="NVIDIA H100 80GB HBM3",
        settings={"suite": "test", "dtype": "bf16", "incomplete": incomplete},
        shapes=shapes,
    )


def test_validation_page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = save_results(_results(incomplete=True), tmp_path / "validate-test.json")
    assert main(["report", "--results", str(path), "-o", str(tmp_path / "html")]) == 0
    page = tmp_path / "html" / "validate-test.html"
    text = page.read_text()
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', text)
    assert len(images) == 4
    from PIL import Image

    for data in images:
        with Image.open(io.BytesIO(base64.b64decode(data))) as image:
            image.load()
    assert "Worst picks" in text and "selection efficiency geomean" in text and "incomplete" in text
    assert "not measured" not in text.lower()
    # half the picks miss (i % 4 of 1 and 3), all persistent beside persistent: one loss group, the whole loss
    losses = text.split("Where selection loses")[1].split("Worst picks")[0]
    assert "persistent -&gt; persistent" in losses and "100.0%" in losses


def test_validation_page_without_model_fields(tmp_path: Path) -> None:
    bench_only = Results(device="x", shapes=[ShapeResult("a", 64, 64, 64, torch_ms=0.01, configs={K[0]: 0.02})])
    path = save_results(bench_only, tmp_path / "bench.json")
    assert main(["report", "--results", str(path), "-o", str(tmp_path)]) == 0
    text = (tmp_path / "bench.html").read_text()
    assert text.count("Not measured") == 3  # no picks (2 plots), no predictions; the torch plot uses the oracle best
    assert "none was recorded" in text
