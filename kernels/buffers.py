"""Buffers a plan uses beside its operands: the fp32 workspace, per-tile lock counters, padded operand copies.

Workspace and locks are cached per device (kernels on one stream run in order, so reuse is safe).  An operand
whose rows are misaligned gets a padded-stride buffer and a plan step (``_AlignedCopy``) that fills it at each
launch with ``padded_copy_kernel``, re-bound to each call's tensor on gemm()'s launch cache.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from theodolite.kernels.config import COPY_PITCH_BYTES
from theodolite.kernels.direct_launch import _Launch
from theodolite.kernels.operands import _Operand
from theodolite.kernels.padded_copy import copy_arguments, padded_copy_kernel

_WORKSPACES: dict[tuple[str, int | None], torch.Tensor] = {}


def _workspace(device: torch.device, elements: int) -> torch.Tensor:
    """A cached fp32 scratch buffer (kernels on one stream run in order, so reuse is safe)."""
    key = (device.type, device.index)
    buf = _WORKSPACES.get(key)
    if buf is None or buf.numel() < elements:
        buf = torch.empty(max(elements, 1), dtype=torch.float32, device=device)
        _WORKSPACES[key] = buf
    return buf


_LOCKS: dict[tuple[str, int | None], torch.Tensor] = {}


def _locks(device: torch.device, count: int) -> torch.Tensor:
    """Cached int32 per-tile arrival counters, all zero between launches (the kernels reset what they use)."""
    key = (device.type, device.index)
    buf = _LOCKS.get(key)
    if buf is None or buf.numel() < count:
        buf = torch.zeros(max(count, 1024), dtype=torch.int32, device=device)
        _LOCKS[key] = buf
    return buf


@contextlib.contextmanager
def fresh_scratch() -> Iterator[None]:
    """Inside, a plan gets a workspace and lock counters of exactly the size it asks (not the device's cached, maybe
    larger, ones), and the cache is left as it was: what a traced launch, which allocates its own, must know."""
    saved = dict(_WORKSPACES), dict(_LOCKS)
    _WORKSPACES.clear()
    _LOCKS.clear()
    try:
        yield
    finally:
        _WORKSPACES.clear()
        _WORKSPACES.update(saved[0])
        _LOCKS.clear()
        _LOCKS.update(saved[1])


class _AlignedCopy:
    """Plan step: copy a misaligned operand into its padded-stride buffer (run at each launch), with
    ``padded_copy.padded_copy_kernel`` (a direct launch after the first, as ``_Launch`` does).

    ``source`` names the gemm() argument it reads (0 a, 1 b; -1 when the operand was made contiguous first),
    so a cached call (``_FastGemm``) re-binds it to that call's tensor of the same metadata (the view it copies
    starts where that tensor does)."""

    __slots__ = ("dst", "src", "buf", "source", "row_major", "first_only", "launch")

    def __init__(
        self, dst: torch.Tensor, src: torch.Tensor, buf: torch.Tensor, source: int, row_major: bool, first_only: bool
    ) -> None:
        self.dst, self.src, self.buf, self.source = dst, src, buf, source
        self.row_major, self.first_only = row_major, first_only
        grid, args, kwargs = copy_arguments(src, buf)
        self.launch = _Launch(padded_copy_kernel, grid, args, kwargs)

    @staticmethod
    def stored(x: torch.Tensor, row_major: bool, first_only: bool) -> torch.Tensor:
        """An operand (2-D, or 3-D batched) as stored: [batch, outer, contiguous]; only batch 0 when broadcast."""
        x3 = x if x.dim() == 3 else x.unsqueeze(0)
        if first_only:
            x3 = x3[:1]
        return x3 if row_major else x3.transpose(-1, -2)

    def view(self, x: torch.Tensor) -> torch.Tensor:
        """The operand as stored from a gemm() argument of the plan's metadata."""
        return self.stored(x, self.row_major, self.first_only)

    def __call__(self) -> None:
        self.launch()

    def run_from(self, x: torch.Tensor) -> None:
        runner = self.launch.runner
        if runner is not None:  # the launcher reads only the address, where the view of x starts too
            args = self.launch.ordered.copy()
            args[0] = x
            runner(*args)
            return
        grid, args, kwargs = copy_arguments(self.view(x), self.buf)
        padded_copy_kernel[grid](*args, **kwargs)


def _aligned_copy(op: _Operand, source: int) -> tuple[_Operand, _AlignedCopy]:
    """A padded-stride buffer for a misaligned operand and the step that fills it (run at each launch): its rows
    start on COPY_PITCH_BYTES boundaries (a multiple of the 16-byte vectors)."""
    src = op.tensor
    first_only = op.batch_stride == 0
    view = _AlignedCopy.stored(src, op.row_major, first_only)
    outer, inner = view.shape[-2], view.shape[-1]
    pitch = COPY_PITCH_BYTES // src.element_size()
    padded = -(-inner // pitch) * pitch
    buf = torch.empty((view.shape[0], outer, padded), dtype=src.dtype, device=src.device)
    dst = buf[..., :inner]
    if padded > inner:  # zero padding: along K the kernels read it (as zeros) instead of masking
        buf[..., inner:].zero_()
    step = _AlignedCopy(dst, view, buf, source, op.row_major, first_only)

    stored = dst if op.row_major else dst.transpose(-1, -2)
    if op.batch_stride == 0 and src.shape[0] > 1:
        stored = stored.expand(src.shape[0], *stored.shape[1:])
    new = _Operand(
        stored,
        op.row_major,
        padded,
        buf.stride(0) if op.batch_stride != 0 else 0,
        True,
        padded,
        op.contiguous_is_k,
    )
    return new, step
