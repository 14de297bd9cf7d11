"""Probe kernels without inline PTX, run in Triton's interpreter on the CPU (TRITON_INTERPRET=1)."""

from __future__ import annotations

import os

import pytest
import torch

pytestmark = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="needs TRITON_INTERPRET=1")


@pytest.mark.parametrize("interleaved", [False, True])
def test_copy_layouts_copy_exactly_their_range(interleaved):
    from theodolite.probes.stream import copy_kernel

    programs, block = 6, 64
    n = 5 * block
    src = torch.rand(programs * n + 7)
    dst = torch.zeros_like(src)
    copy_kernel[(programs,)](src, dst, n, BLOCK=block, INTERLEAVED=interleaved)
    assert torch.equal(dst[: programs * n], src[: programs * n])
    assert (dst[programs * n :] == 0).all()


def test_read_and_write_streams():
    from theodolite.probes.stream import read_kernel, write_kernel

    programs, block = 4, 32
    n = 3 * block
    src = torch.rand(programs * n)
    out = torch.zeros(programs * block)
    read_kernel[(programs,)](src, out, n, 2, BLOCK=block)
    assert out.sum().item() == pytest.approx(2 * src.sum().item(), rel=1e-4)
    buffer = torch.zeros(programs * n + 3)
    write_kernel[(programs,)](buffer, n, 1.5, BLOCK=block)
    assert (buffer[: programs * n] == 1.5).all() and (buffer[programs * n :] == 0).all()


@pytest.mark.parametrize("shape", [(37, 70), (64, 96), (5, 130)])
def test_tile_write_covers_the_matrix_and_nothing_past_it(shape):
    """Grouped tile order with a partial last group and ragged edge tiles: every element of the matrix is written,
    the columns beyond it in each row pitch are not."""
    from theodolite.probes.stream import TileWrite, launch_tile_write

    rows, cols = shape
    backing = torch.zeros(rows, cols + 9, dtype=torch.float16)
    launch_tile_write(backing[:, :cols], TileWrite(block_m=16, block_n=32, group_m=3, warps=1))
    assert (backing[:, :cols] == 1.5).all()
    assert (backing[:, cols:] == 0).all()


def test_mma_kernel_accumulates_iters_dots():
    from theodolite.probes.matrix import mma_kernel

    bm, bn, bk, iters = 16, 16, 16, 3
    a = torch.randn(bm, bk) * 0.1
    b = torch.randn(bn, bk) * 0.1
    out = torch.zeros(2)
    times = torch.zeros(4, dtype=torch.int64)
    mma_kernel[(2,)](a, b, out, times, iters, BM=bm, BN=bn, BK=bk, PRECISION="ieee", TIMED=False)
    expected = float((a @ b.T).sum()) * iters
    assert out[0].item() == pytest.approx(expected, rel=1e-4, abs=1e-5)
    assert out[1].item() == pytest.approx(expected, rel=1e-4, abs=1e-5)


@pytest.mark.parametrize("kind", ["read", "write", "copy"])
@pytest.mark.parametrize(
    "variant",
    [
        dict(flat=True, block=64, warps=1),
        dict(flat=True, block=32, warps=1, load_cm="", evict="evict_first", store_cm=""),
        dict(flat=True, block=32, warps=1, store_cm=".cs"),
        dict(flat=False, block=32, warps=1, per_sm=2),
        dict(flat=False, block=32, warps=1, per_sm=2, interleaved=True),
    ],
)
@pytest.mark.parametrize("extra", [0, 5])
def test_stream_variants_touch_exactly_the_bytes_they_count(kind, variant, extra):
    from theodolite.probes.stream import StreamVariant, launch_stream, stream_bytes

    v = StreamVariant(**variant)
    sm_count = 3
    nbytes = 4 * (64 * 7 + extra)
    n = stream_bytes(v, nbytes, sm_count) // 4
    assert 0 < n <= nbytes // 4
    if v.flat:
        assert n == nbytes // 4  # flat kernels mask the tail: every element counted is touched
    src = torch.rand(64 * 8) + 0.01
    dst = torch.zeros_like(src)
    out = torch.zeros(64 * 64)
    launch_stream(kind, v, sm_count, src, dst, out, nbytes)
    if kind == "copy":
        assert torch.equal(dst[:n], src[:n]) and (dst[n:] == 0).all()
    elif kind == "write":
        assert (src[:n] == 1.5).all() and (src[n:] != 1.5).all()
    elif v.flat:
        assert (out == 0).all()  # the read sink never receives a store
    else:
        assert out.sum().item() == pytest.approx(src[:n].sum().item(), rel=1e-4)


def test_fma_kernel_untimed_chain():
    from theodolite.probes.matrix import fma_kernel

    block, iters = 16, 5
    x = torch.rand(block)
    out = torch.zeros(2 * block)
    times = torch.zeros(4, dtype=torch.int64)
    fma_kernel[(2,)](x, out, times, iters, BLOCK=block, TIMED=False)
    a, b, y = x * 0.25 + 0.5, x * 0.25, x.clone()
    for _ in range(iters):
        y = y * a + b
    assert torch.allclose(out[:block], y, rtol=1e-5) and torch.allclose(out[block:], y, rtol=1e-5)


def test_tile_write_probe_failure_leaves_the_metric_unsupported(monkeypatch):
    """Where the tile-write launch or its timing fails (here: no CUDA events on the CPU), the metric is recorded as
    unsupported with the reason, and nothing else of the HBM probe's result is touched."""
    from theodolite.probes import hbm
    from theodolite.probes.common import ProbeContext, ProbeResult

    monkeypatch.setattr(hbm, "TILE_WRITE_SHAPE", (64, 128))
    result = ProbeResult()
    hbm.tile_write(ProbeContext(quick=True), torch.zeros(64 * 128), result)
    assert "hbm_tile_write_bandwidth" not in result.metrics
    assert result.unsupported["hbm_tile_write_bandwidth"]
