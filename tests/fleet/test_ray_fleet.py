"""The Ray path on a local Ray instance on the CPU: GPUs declared as resources, probes faked."""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from theodolite import fleet  # noqa: E402
from theodolite.profile import KernelBuild, Profile, load_profile  # noqa: E402
from theodolite.profile.datasheet import h100_sxm  # noqa: E402
from theodolite.profile.resolve import bundled_dir  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def fake_measure(device: int, quick: bool) -> Profile:
    """What a timing task would measure: the datasheet H100, with GPU 2 reading HBM 15% slow."""
    gpu = ray.get_gpu_ids()[0]
    base = h100_sxm()
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    notes = f"fake; device {device}; CUDA_VISIBLE_DEVICES={visible}; quick={quick}"
    metrics = dict(base.metrics)
    if str(gpu) == "2":
        m = metrics["hbm_read_bandwidth"]
        metrics["hbm_read_bandwidth"] = replace(m, value=m.value * 0.85)
    return replace(base, metrics=metrics, provenance=replace(base.provenance, source="measured", notes=notes))


def fake_build(architecture: str) -> tuple[tuple[KernelBuild, ...], str]:
    build = KernelBuild("persistent", "persistent/128x256x64/g8/w8/s3/k1", "bf16", architecture, 168, 0, 147456, 3)
    return (build,), f"1 kernel builds for {architecture}"


@pytest.fixture(scope="module")
def local_ray():  # noqa: ANN201
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the fakes travel to the workers
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    hidden = os.environ.pop("CUDA_VISIBLE_DEVICES", None)  # "" (no GPU) would forbid declaring three
    try:
        ray.init(num_cpus=3, num_gpus=3, include_dashboard=False, log_to_driver=False)
    finally:
        if hidden is not None:
            os.environ["CUDA_VISIBLE_DEVICES"] = hidden
    yield ray
    ray.shutdown()


def test_one_task_per_gpu_then_builds_then_the_fleet_verdict(local_ray, tmp_path: Path) -> None:  # noqa: ANN001
    page = tmp_path / "fleet.html"
    done, result = fleet.calibrate_with_ray(
        tmp_path,
        reference=bundled_dir() / "nvidia-h100-80gb-hbm3.h5",
        quick=True,
        html=page,
        measure=fake_measure,
        build=fake_build,
    )
    assert sorted(item.gpu for item in done) == ["0", "1", "2"]  # each GPU once
    assert len({item.host for item in done}) == 1
    for item in done:
        profile = load_profile(item.path)
        assert item.path.parent.name == item.host and item.path.name == f"nvidia-h100-80gb-hbm3-gpu{item.gpu}.h5"
        # Ray gave the task one GPU and told CUDA so; the task calibrated device 0 of what it saw
        assert f"device 0; CUDA_VISIBLE_DEVICES={item.gpu}; quick=True" in profile.provenance.notes
        assert profile.kernel_builds[0].architecture == "sm_90"
        assert profile.provenance.notes.startswith("1 kernel builds for sm_90 (compiled once for the node's 3 card")
    outliers = {card.label: card.outliers for card in result.cards}
    assert outliers == {
        "nvidia-h100-80gb-hbm3-gpu0.h5": [],
        "nvidia-h100-80gb-hbm3-gpu1.h5": [],
        "nvidia-h100-80gb-hbm3-gpu2.h5": ["hbm_read_bandwidth"],
    }
    assert not result.passed and page.is_file() and "Fleet check: 3 card(s)" in page.read_text()


def test_existing_profiles_are_refused_without_force(local_ray, tmp_path: Path) -> None:  # noqa: ANN001
    fleet.calibrate_with_ray(tmp_path, measure=fake_measure, builds=False)
    with pytest.raises(Exception, match="file exists"):
        fleet.calibrate_with_ray(tmp_path, measure=fake_measure, builds=False)
    done, result = fleet.calibrate_with_ray(tmp_path, measure=fake_measure, builds=False, force=True)
    assert len(done) == 3 and all(load_profile(item.path).kernel_builds == () for item in done)
    assert result.reference is None
