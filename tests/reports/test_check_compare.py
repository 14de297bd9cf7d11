"""check: pass on itself, fail (exit 1) on a metric out of tolerance, flag only SKU metrics across SKUs; compare."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from theodolite.reports.check import ToleranceError, check_profiles, load_tolerances, verdict

from theodolite.cli import main
from theodolite.profile import Measurement, save_profile


def _save(profile, path: Path) -> Path:  # noqa: ANN001
    save_profile(profile, path)
    return path


def test_check_passes_on_itself(make_measured, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: ANN001
    path = _save(make_measured(), tmp_path / "a.h5")
    html = tmp_path / "check.html"
    assert main(["check", str(path), "--against", str(path), "--html", str(html)]) == 0
    assert "PASS" in capsys.readouterr().out
    assert "badge good" in html.read_text()


def test_check_fails_on_slow_memory(make_measured, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: ANN001
    ref = make_measured(seed=1)
    slow = make_measured(scale_hbm=0.8, seed=2)  # same SKU, 20% slower HBM: a bad card
    rows = check_profiles(slow, ref)
    failed = {row.metric for row in rows if row.failed}
    assert failed == {"hbm_read_bandwidth"}
    args = ["check", str(_save(slow, tmp_path / "new.h5")), "--against", str(_save(ref, tmp_path / "ref.h5"))]
    assert main([*args, "--html", str(tmp_path / "c.html")]) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and "hbm_read_bandwidth" in out
    assert 'tr class="fail"' in (tmp_path / "c.html").read_text()


def test_h200_against_h100_flags_memory_only(make_measured) -> None:  # noqa: ANN001
    h100 = make_measured(memory_bytes=80 * 1024**3, seed=1)
    h200 = make_measured(scale_hbm=4.8 / 3.35, memory_bytes=141 * 1024**3, seed=2)
    h200 = replace(h200, provenance=replace(h200.provenance, device_name="NVIDIA H200"))
    rows = check_profiles(h200, h100)
    failed = {row.metric for row in rows if row.failed}
    assert failed == {"hbm_read_bandwidth", "memory_bytes"}
    assert all("SKU-defining" in row.note for row in rows if row.failed)
    assert not verdict(rows)


def test_missing_metric_fails_and_tolerance_file(make_measured, tmp_path: Path) -> None:  # noqa: ANN001
    ref = make_measured(seed=1)
    metrics = dict(ref.metrics)
    del metrics["smem_latency"]
    metrics["l2_latency_far"] = Measurement("l2_latency_far", 480 * 1.3, "cycle", "pointer_chase")
    new = replace(ref, metrics=metrics, unsupported={"smem_latency": "probe crashed"})
    rows = {row.metric: row for row in check_profiles(new, ref)}
    assert rows["smem_latency"].status == "missing" and "probe crashed" in rows["smem_latency"].note
    assert rows["l2_latency_far"].status == "FAIL"
    toml = tmp_path / "tol.toml"
    toml.write_text("[metrics]\nl2_latency_far = 0.35\nsmem_latency = { skip = true }\n")
    rows = {row.metric: row for row in check_profiles(new, ref, load_tolerances(toml))}
    assert rows["l2_latency_far"].status == "pass" and rows["smem_latency"].status == "skip"
    assert verdict(list(rows.values()))
    js = tmp_path / "tol.json"
    js.write_text(json.dumps({"units": {"cycle": 0.5}, "metrics": {"smem_latency": {"skip": True}}}))
    assert verdict(check_profiles(new, ref, load_tolerances(js)))
    js.write_text(json.dumps({"metrics": {"no_such_metric": 0.1}}))
    with pytest.raises(ToleranceError, match="no_such_metric"):
        load_tolerances(js)


def test_check_bad_tolerance_file_is_a_clean_error(make_measured, tmp_path: Path, capsys) -> None:  # noqa: ANN001
    path = _save(make_measured(), tmp_path / "a.h5")
    bad = tmp_path / "bad.toml"
    bad.write_text("[metrics\n")
    assert main(["check", str(path), "--against", str(path), "--tolerance", str(bad)]) == 2
    assert "bad.toml" in capsys.readouterr().err


def test_compare_prints_ratios_and_html(make_measured, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: ANN001
    h100 = _save(make_measured(seed=1), tmp_path / "h100.h5")
    h200 = _save(make_measured(scale_hbm=1.5, seed=2), tmp_path / "h200.h5")
    html = tmp_path / "cmp.html"
    assert main(["compare", str(h200), str(h100), "--html", str(html)]) == 0
    out = capsys.readouterr().out
    assert "hbm_read_bandwidth" in out and ("1.49" in out or "1.50" in out)
    text = html.read_text()
    assert text.count("data:image/png;base64,") == 3


def test_noisy_measurements_widen_their_tolerance(make_measured) -> None:  # noqa: ANN001
    ref = make_measured(seed=1)
    noisy = Measurement.from_samples("l2_bandwidth", [9e12 * f for f in (0.7, 1.0, 1.3, 0.8, 1.2)], "B/s", "l2")
    new = replace(ref, metrics={**ref.metrics, "l2_bandwidth": replace(noisy, value=9e12 * 1.2)})
    row = {r.metric: r for r in check_profiles(new, ref)}["l2_bandwidth"]
    assert row.status == "pass" and "widened" in row.note
    exact = replace(ref, metrics={**ref.metrics, "sm_count": Measurement("sm_count", 114, "1", "driver")})
    assert {r.metric for r in check_profiles(exact, ref) if r.failed} == {"sm_count"}


def test_bundled_h200_against_h100_fails_only_on_sku_metrics() -> None:
    """The measured profiles we ship: H200 vs H100 fails on memory and L2 (expected), nothing spurious."""
    from theodolite.reports.check import expected_failure

    from theodolite.profile import load_profile

    root = Path(__file__).resolve().parents[2] / "profiles"
    h100 = load_profile(root / "nvidia-h100-80gb-hbm3.h5")
    h200 = load_profile(root / "nvidia-h200.h5")
    rows = check_profiles(h200, h100)
    failed = {row.metric for row in rows if row.failed}
    assert {"memory_bytes", "hbm_read_bandwidth", "hbm_copy_bandwidth", "l2_bytes"} <= failed
    assert all(expected_failure(row) for row in rows if row.failed), failed
    status = {row.metric: row.status for row in rows}
    assert status["launch_overhead"] == "info" and status["clock_ramp_s"] == "info"
    assert all(status[name] == "info" for name in status if name.startswith("model_"))
    assert status["mma_throughput_bf16"] == "pass" and status["sm_count"] == "pass"
    assert verdict(check_profiles(h100, h100))
