"""Probes on a real GPU (skipped without one): quick runs whose answers the driver or physics bound."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu


def test_census_matches_driver_and_smem_bandwidth_is_sane():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    from theodolite.probes.runner import collect

    result, seconds = collect(0, quick=True, only=("smem",), log=lambda _: None)
    driver = torch.cuda.get_device_properties(0).multi_processor_count
    assert result.metrics["sm_count"].value == driver
    assert 16 <= result.metrics["smem_bandwidth_per_sm"].value <= 1024
    assert 5 <= result.metrics["smem_latency"].value <= 200
    assert set(seconds) == {"topology", "smem"}


def test_hbm_copy_within_5_percent_of_torch_copy():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    from theodolite.probes.runner import collect

    result, _ = collect(0, quick=True, only=("hbm",), log=lambda _: None)
    copy = result.metrics["hbm_copy_bandwidth"].value
    torch_copy = result.references["torch_copy_bandwidth"]
    assert copy >= 0.95 * torch_copy, (copy, torch_copy, result.metrics["hbm_copy_bandwidth"].settings)
    read = result.metrics["hbm_read_bandwidth"].value
    write = result.metrics["hbm_write_bandwidth"].value
    assert 0.5 * torch_copy <= read <= 2.0 * torch_copy and 0.5 * torch_copy <= write <= 2.0 * torch_copy
    # one SM alone reads far below the device but at least its share of it (H100/H200: ~90 GB/s)
    one_sm = result.metrics["hbm_read_bandwidth_one_sm"].value
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    assert read / sms < one_sm < 0.2 * read, (one_sm, read, sms)
    # a GEMM epilogue's tile-by-tile stores: measured (not recorded unsupported), at most the plain write's rate
    assert "hbm_tile_write_bandwidth" not in result.unsupported, result.unsupported
    tile = result.metrics["hbm_tile_write_bandwidth"].value
    assert 0.2 * write <= tile <= 1.1 * write, (tile, write)


def test_timing_floors_order_the_brackets():
    """An empty launch costs more between two events after a flush than per call in graph replays, both a few us."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    from theodolite.kernels.benchmark import Timer, timing_floors

    timer = Timer()
    floors = timing_floors(timer)
    assert timer.last_mode == "graph", timer.last_mode  # else the graph figure is the flushed one (no bracket)
    assert 1e-4 < floors["graph_ms"] < floors["flushed_ms"] < 0.03, floors
    assert floors["l2_bytes"] == torch.cuda.get_device_properties(0).L2_cache_size


def test_graph_launch_is_the_gpus_own_gap_well_under_the_hosts():
    """An empty Triton kernel replayed back to back from a CUDA graph costs the GPU about what a one-element torch
    kernel does the same way (~1-2 us on Hopper), and less than the host-driven back-to-back figure."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    from theodolite.probes.launch import graph_launch_time
    from theodolite.probes.runner import collect

    result, _ = collect(0, quick=True, only=("launch",), log=lambda _: None)
    graph = result.metrics["launch_overhead_graph"].value
    host = result.metrics["launch_overhead"].value
    x = torch.zeros(1, device="cuda")
    torch_kernel = graph_launch_time(lambda: x.add_(1.0), 100, 5)
    assert 1e-7 < graph < 1e-5, graph
    assert graph < host, (graph, host)
    assert 0.25 * torch_kernel < graph < 4.0 * torch_kernel, (graph, torch_kernel)
