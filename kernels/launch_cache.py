"""gemm()'s launch cache: a call with the metadata of one that ran before re-binds that plan's launches.

``_fast_key`` is the key of a call (config, each tensor's device, dtype, shape, strides and address modulo 16
bytes, the scalars, which fp8 scales are tensors and their metadata), or None where the call must take the full path;
``_FastGemm`` holds the compiled launchers, constant arguments and copy steps of a plan that ran once and re-binds
them to each call's tensors (and the scale its rule makes of each call's fp8 scales), so a repeated call costs one
lookup, the output allocation and one direct launch per kernel (and one small multiply where both scales are
tensors).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
from theodolite.kernels.buffers import _AlignedCopy
from theodolite.kernels.config import GemmConfig
from theodolite.kernels.direct_launch import _Descriptor, _Launch
from theodolite.kernels.operands import ScaleRule

if TYPE_CHECKING:
    from theodolite.kernels.launch import GemmPlan


class _FastGemm:
    """A cached gemm() for one (problem, config, argument metadata): compiled launchers, grids, constant
    arguments and workspace, re-bound to each call's tensors.  A repeated gemm() call then costs a
    dictionary lookup, the output allocation and one direct launch per kernel."""

    __slots__ = ("copies", "launches", "out_shape", "out_dtype", "scale_rule")

    def __init__(
        self,
        copies: list[_AlignedCopy],
        launches: list[tuple[Callable[..., None], list[Any], tuple[tuple[int, int | _Descriptor], ...]]],
        out_shape: tuple[int, ...] | None,
        out_dtype: torch.dtype,
        scale_rule: ScaleRule | None = None,
    ) -> None:
        self.copies = copies
        self.launches = launches
        self.out_shape = out_shape
        self.out_dtype = out_dtype
        self.scale_rule = scale_rule

    @classmethod
    def of(cls, plan: GemmPlan, allocate_out: bool) -> _FastGemm | None:
        """The cached form of a plan that has run once; None when it cannot be re-bound (an operand made
        contiguous first, a C or bias made here)."""
        if not plan.steps:
            return None
        copies: list[_AlignedCopy] = []
        launches: list[tuple[Callable[..., None], list[Any], tuple[tuple[int, int | _Descriptor], ...]]] = []
        for step in plan.steps:
            if isinstance(step, _AlignedCopy) and step.source in (0, 1) and not launches:
                copies.append(step)
                continue
            if not isinstance(step, _Launch) or step.runner is None or not step.sources:
                return None
            if any(source == -1 for source in step.sources):
                return None
            ordered = list(step.ordered)
            slots = tuple((i, source) for i, source in enumerate(step.sources) if source is not None)
            for i, _ in slots:
                ordered[i] = None  # hold no reference to this call's tensors
            launches.append((step.runner, ordered, slots))
        out_shape = tuple(plan.out.shape) if allocate_out else None
        return cls(copies, launches, out_shape, plan.out.dtype, plan.scale_rule)

    def run(
        self,
        a: torch.Tensor,
        b: torch.Tensor,
        out: torch.Tensor | None,
        c: torch.Tensor | None,
        bias: torch.Tensor | None,
        a_scale: Any = None,
        b_scale: Any = None,
    ) -> torch.Tensor:
        if out is None:
            out = torch.empty(self.out_shape, dtype=self.out_dtype, device=a.device)  # type: ignore[arg-type]
        rule = self.scale_rule
        tensors = (a, b, out, c, bias, *(rule(a_scale, b_scale) if rule is not None else (None, None)))
        for copy in self.copies:
            copy.run_from(a if copy.source == 0 else b)
        for runner, ordered, slots in self.launches:
            args = ordered.copy()
            for i, source in slots:
                if type(source) is int:
                    args[i] = tensors[source]
                else:  # a TMA descriptor made on the host, over this call's operand
                    args[i] = source.bind(tensors[source.source])  # type: ignore[union-attr,index,arg-type]
            runner(*args)
        return out


_FAST: dict[tuple[Any, ...], _FastGemm] = {}
_FAST_MAX = 4096
_NUMBER = (int, float)


def _meta(x: Any) -> tuple[Any, ...] | None:
    """What a plan depends on of a tensor: device, dtype, shape, strides and its base address modulo 16 bytes
    (the vector widths of its loads: 16 bytes, or 8, 4 or 2 for misaligned rows)."""
    return (x.device, x.dtype, x.shape, x.stride(), x.data_ptr() & 15)


def _scale_meta(x: Any) -> Any:
    """What a plan depends on of an fp8 scale: None; a number's value (folded into alpha); a tensor's device, dtype,
    shape and strides (its rule; ``scale_rule`` checked them) and address modulo 16 bytes (the pointer's
    specialization); False: neither (the full path names the error)."""
    if x is None:
        return None
    if type(x) in _NUMBER:
        return float(x)
    if isinstance(x, torch.Tensor):
        return (x.device, x.dtype, x.shape, x.stride(), x.data_ptr() & 15)
    return False


def _fast_key(
    a: Any, b: Any, config: Any, out: Any, alpha: Any, beta: Any, c: Any, bias: Any,
    out_dtype: Any, num_sms: Any, a_scale: Any, b_scale: Any, precision: Any,
) -> tuple[Any, ...] | None:  # fmt: skip
    """The cache key of a gemm() call, or None when the call must take the full path (kept lean: it runs
    at every call)."""
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and type(config) is GemmConfig):
        return None
    if type(alpha) not in _NUMBER or type(beta) not in _NUMBER:
        return None
    # base addresses modulo 16 bytes, not just "aligned": a misaligned operand's load width follows them
    key: tuple[Any, ...] = (
        config, a.device, a.dtype, a.shape, a.stride(), a.data_ptr() & 15,
        b.device, b.dtype, b.shape, b.stride(), b.data_ptr() & 15, alpha, beta,
    )  # fmt: skip
    if out is not None:
        if not isinstance(out, torch.Tensor):
            return None
        key = (*key, "out", out.device, out.dtype, out.shape, out.stride(), out.data_ptr() & 15)
    if a_scale is not None or b_scale is not None:
        scales = (_scale_meta(a_scale), _scale_meta(b_scale))
        if scales[0] is False or scales[1] is False:
            return None
        key = (*key, "scales", *scales)
    if c is None and bias is None and out_dtype is None and num_sms is None and precision is None:
        return key
    if out_dtype is not None and not isinstance(out_dtype, (str, torch.dtype)):
        return None
    if (num_sms is not None and type(num_sms) is not int) or not isinstance(precision, (str, type(None))):
        return None
    extra: list[Any] = ["extra", out_dtype, num_sms, precision]
    for x in (c, bias):
        if x is None:
            extra.append(None)
        elif isinstance(x, torch.Tensor):
            extra.append(_meta(x))
        else:
            return None
    return (*key, *extra)
