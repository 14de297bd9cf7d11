"""The profile sheet renders from datasheet and measured profiles, and every plot is a real PNG."""

from __future__ import annotations

import base64
import io
import re
import shutil
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

from theodolite.reports import plots  # noqa: E402
from theodolite.reports.profile_page import render_profile, write_profile_page  # noqa: E402

from theodolite.cli import main  # noqa: E402
from theodolite.profile import load_profile, save_profile  # noqa: E402
from theodolite.profile.datasheet import mi300x  # noqa: E402
from theodolite.profile.resolve import bundled_dir  # noqa: E402

IMG = re.compile(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"')


def _pngs(text: str) -> list[bytes]:
    return [base64.b64decode(match) for match in IMG.findall(text)]


def _decodes(png: bytes) -> tuple[int, int]:
    from PIL import Image

    with Image.open(io.BytesIO(png)) as image:
        image.load()
        assert image.format == "PNG"
        return image.size


def test_datasheet_profile_page_says_not_measured() -> None:
    text = render_profile(mi300x())
    assert "AMD Instinct MI300X" in text
    assert text.count("Not measured") == 3  # no bandwidth sweep, no programs sweep, no bandwidth-vs-SMs sweep
    pngs = _pngs(text)
    assert len(pngs) >= 2  # latency ladder (hbm_latency) and roofline come from metrics
    for png in pngs:
        assert _decodes(png)[0] > 100
    assert "hbm_read_bandwidth" in text and "datasheet" in text


def test_bundled_profile_through_the_cli(tmp_path: Path) -> None:
    bundled = bundled_dir() / "amd-instinct-mi300x.h5"
    assert main(["report", str(bundled), "-o", str(tmp_path)]) == 0
    page = tmp_path / "amd-instinct-mi300x.html"
    assert page.is_file() and "<html" in page.read_text()


def test_measured_profile_draws_every_plot(measured, tmp_path: Path) -> None:  # noqa: ANN001
    groups = plots.classify(measured)
    assert [c.name for c in groups["bandwidth"]] == ["l2_bandwidth_vs_working_set"]
    assert [c.name for c in groups["latency"]] == ["pointer_chase_latency"]
    assert [c.name for c in groups["programs"]] == ["matrix_wave_staircase"]
    assert [c.name for c in groups["bandwidth_sms"]] == ["hbm_read_bandwidth_vs_sms", "l2_bandwidth_vs_sms"]
    assert [c.name for c in groups["other"]] == ["l2_latency_histogram", "clock_under_matrix_load"]
    assert plots.knee_of(groups["bandwidth"][0]) == 40e6
    text = render_profile(measured)
    assert "Not measured" not in text
    pngs = _pngs(text)
    assert len(pngs) == 7  # bandwidth, latency, staircase, bandwidth vs SMs, roofline, two others
    for png in pngs:
        _decodes(png)
    assert "knee" in text and "NOISY" not in text
    # HDF5 round trip keeps the curves the page draws
    path = tmp_path / "synthetic.h5"
    save_profile(measured, path)
    page = write_profile_page(load_profile(path), tmp_path / "html")
    assert page.name == "synthetic.html"
    assert len(_pngs(page.read_text())) == 7


def test_knee_falls_back_to_the_metric(make_measured) -> None:  # noqa: ANN001
    from dataclasses import replace

    profile = make_measured()
    curve = profile.curves["l2_bandwidth_vs_working_set"]
    bare = replace(curve, attrs={})
    profile = replace(profile, curves={**profile.curves, bare.name: bare})
    figure = plots.bandwidth_vs_working_set(profile)
    labels = [line.get_label() for line in figure.axes[0].get_lines()]
    assert any(label.startswith("l2_effective_bytes") for label in labels)


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name) or (f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").exists() else None)
        if found:
            return found
    return None


# Test-only probe appended to a copy of the page (the pages themselves carry no script): after load,
# record each image's decoded width so the dumped DOM shows whether the browser decoded it.
PROBE = """<script>window.addEventListener('load', () => {
  const widths = Array.from(document.images).map(i => (i.complete ? i.naturalWidth : -1));
  document.body.setAttribute('data-widths', widths.join(','));
});</script>"""


def check_in_chromium(page: Path, tmp_path: Path) -> list[int]:
    """Load ``page`` in headless Chromium; return the decoded width of every <img> (skip if no Chromium)."""
    browser = _chromium()
    if browser is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    probe = tmp_path / f"probe-{page.name}"
    probe.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    base = [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        f"--user-data-dir={tmp_path / 'chrome'}",
        "--virtual-time-budget=5000",
    ]
    done = subprocess.run([*base, "--dump-dom", probe.as_uri()], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    dom = done.stdout
    assert "<h1>" in dom
    sources = re.findall(r'<img src="([^"]+)"', dom)
    assert len(sources) == len(_pngs(page.read_text()))
    for source in sources:
        assert source.startswith("data:image/png;base64,")
        _decodes(base64.b64decode(source.split(",", 1)[1]))
    found = re.search(r'data-widths="([^"]*)"', dom)
    assert found is not None, "the page did not finish loading"
    widths = [int(w) for w in found.group(1).split(",") if w]
    assert len(widths) == len(sources) and all(w > 0 for w in widths), widths
    shot = tmp_path / f"{page.stem}.png"
    done = subprocess.run(
        [*base, f"--screenshot={shot}", "--window-size=1200,2000", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    assert _decodes(shot.read_bytes()) == (1200, 2000)
    return widths


@pytest.mark.parametrize("which", ["datasheet", "measured"])
def test_profile_page_loads_in_headless_chromium(which: str, measured, tmp_path: Path) -> None:  # noqa: ANN001
    profile = mi300x() if which == "datasheet" else measured
    page = write_profile_page(profile, tmp_path, which)
    widths = check_in_chromium(page, tmp_path)
    assert len(widths) == (2 if which == "datasheet" else 7)


def test_check_and_compare_pages_load_in_headless_chromium(make_measured, tmp_path: Path) -> None:  # noqa: ANN001
    from theodolite.reports.check import check_profiles, render_check_html
    from theodolite.reports.compare import render_compare_html
    from theodolite.reports.html import write_page

    new, ref = make_measured(scale_hbm=1.4, seed=1), make_measured(seed=2)
    check = write_page(render_check_html(check_profiles(new, ref), new, ref), tmp_path / "check.html")
    assert check_in_chromium(check, tmp_path) == []
    compare = write_page(render_compare_html(new, ref), tmp_path / "compare.html")
    assert len(check_in_chromium(compare, tmp_path)) == 3


def test_validation_page_loads_in_headless_chromium(tmp_path: Path) -> None:
    from theodolite.reports.html import write_page
    from theodolite.reports.validation_page import render_validation

    from theodolite.results import Results, ShapeResult

    keys = ["persistent/64x64x64/g8/w4/s4/k1", "persistent/128x128x64/g8/w8/s3/k1"]
    shapes = [
        ShapeResult(
            f"s{i}",
            64 * (i + 1),
            256,
            512,
            torch_ms=0.02,
            configs={keys[0]: 0.02, keys[1]: 0.01 * (i + 1)},
            model_pick=keys[i % 2],
            model_predicted_ms={keys[0]: 0.015, keys[1]: 0.012},
        )
        for i in range(4)
    ]
    page = write_page(render_validation(Results(device="fake", shapes=shapes)), tmp_path / "v.html")
    assert len(check_in_chromium(page, tmp_path)) == 4


def test_report_without_arguments_renders_every_bundled_profile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from theodolite.profile.resolve import bundled_profiles

    monkeypatch.chdir(tmp_path)
    assert main(["report"]) == 0
    folder = tmp_path / "reports" / "html"
    pages = sorted(p.name for p in folder.glob("*.html") if p.name != "index.html")
    assert pages == sorted(f"{p.stem}.html" for p in bundled_profiles())
    index = (folder / "index.html").read_text()
    assert all(f'href="{page}"' in index for page in pages)


def test_report_of_a_missing_file_is_a_clean_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(tmp_path / "nope.h5"), "-o", str(tmp_path)]) == 2
    assert "nope.h5" in capsys.readouterr().err
    assert main(["report", "--results", str(tmp_path / "nope.json"), "-o", str(tmp_path)]) == 2
