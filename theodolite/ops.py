"""theodolite's GEMMs as PyTorch operators: ``theodolite::linear`` and ``theodolite::mm``.

Registered on a ``torch.library.Library`` with fake implementations, so ``torch.compile`` treats them as opaque calls
(shapes without specializing on them), and with an autograd kernel that differentiates them through the same
kernels: for ``y = x @ W.T + b``, ``dX = dY @ W`` (layout nn), ``dW = dY.T @ X`` (layout tn, a transposed view),
``db = dY.sum(0)``.

The eager path is kept short because a decoder's small-M GEMMs are host bound: each (shape, strides, dtype,
device, alignment) is resolved once into a runner that holds the picked config and the launch cache's entry
(``kernels.launch.cached_runner``), so a repeated call costs one key, one dictionary lookup and one direct launch.
Where nothing needs the dispatcher (no autograd, no compile, no tensor subclass or dispatch mode), ``linear``
calls that runner without going through it.  With a gradient recorded, ``linear`` records one autograd.Function
node through its C++ apply (``autograd.Function.apply``'s Python layer binds the arguments through ``inspect`` at
every call, most of a recorded call's host time); its metadata's entry (``_LinearGrad``) holds the forward's runner
and, per gradient metadata, the backward GEMMs' runners, so a repeated training step selects and plans nothing and
keys only dY's metadata; the node saves only the tensor its backward reads (W for dX, X for dW).

Inputs the kernels do not run (a dtype other than fp16/bf16/fp32, a device that is not CUDA, the CPU outside
Triton's interpreter) run torch's own kernel, with one ``FallbackWarning`` per reason.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from theodolite.errors import FallbackWarning

Runner = Callable[[Tensor, Tensor, Tensor | None], Tensor]

_CUDA_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
_INTERPRETER_DTYPES = (torch.float16, torch.float32)  # Triton's interpreter has no bf16
_CACHE_LIMIT = 4096
_WARNED: set[str] = set()


def _interpreting() -> bool:
    from theodolite.kernels.launch import interpreting

    return interpreting()


def unsupported(x: Tensor, w: Tensor) -> str | None:
    """Why the bundled kernels cannot run ``x @ w`` (None: they can)."""
    device = x.device
    allowed: tuple[torch.dtype, ...]
    if device.type == "cuda":
        allowed = _CUDA_DTYPES
    elif device.type == "cpu" and _interpreting():
        allowed = _INTERPRETER_DTYPES
    else:
        return f"the kernels run on CUDA devices (or the CPU under TRITON_INTERPRET=1), not on {device.type}"
    if x.dtype not in allowed:
        names = ", ".join(str(d).removeprefix("torch.") for d in allowed)
        return f"the kernels run {names} on {device.type}, not {str(x.dtype).removeprefix('torch.')}"
    return None


def _warn_once(reason: str) -> None:
    if reason not in _WARNED:
        _WARNED.add(reason)
        warnings.warn(f"theodolite: {reason}; torch's kernel runs instead", FallbackWarning, stacklevel=4)


def _fp32_precision(dtype: torch.dtype) -> str | None:
    """fp32 follows torch's matmul setting: tf32 tensor cores where torch allows them, else ieee fp32."""
    if dtype is not torch.float32:
        return None
    return "ieee" if torch.get_float32_matmul_precision() == "highest" else "tf32"


def _unit_stride(x: Tensor) -> Tensor:
    """x itself where one of its two dimensions is contiguous (the kernels' requirement), else a contiguous copy."""
    if x.stride(-1) == 1 or x.stride(-2) == 1 or x.shape[-1] <= 1 or x.shape[-2] <= 1:
        return x
    return x.contiguous()


class _Gemm:
    """``a @ b (+ bias)`` for one argument metadata: the model's config picked once, then gemm()'s cached launch."""

    __slots__ = ("config", "sms", "precision", "fast", "fast_w")

    def __init__(self, a: Tensor, b: Tensor, precision: str | None) -> None:
        from theodolite import api
        from theodolite.kernels.launch import problem_of

        profile = api.resolve(None)
        self.config = api.select_problem(problem_of(a, b, None, precision), profile).config
        self.sms = int(profile.value("sm_count"))
        self.precision = precision
        self.fast: Callable[..., Tensor] | None = None
        self.fast_w: Callable[..., Tensor] | None = None  # ``fast`` where it reads b by its address alone

    def __call__(self, a: Tensor, b: Tensor, bias: Tensor | None) -> Tensor:
        fast = self.fast
        if fast is not None:
            return fast(a, b, None, None, bias)
        from theodolite.kernels.launch import cached_runner, gemm, reads_b_by_address

        out = gemm(a, b, self.config, bias=bias, num_sms=self.sms, precision=self.precision)
        self.fast = fast = cached_runner(a, b, self.config, bias=bias, num_sms=self.sms, precision=self.precision)
        self.fast_w = fast if fast is not None and reads_b_by_address(fast) else None
        return out


class _LinearGemm:
    """``F.linear(x, w, bias)`` as ``x @ w.t()`` for one metadata; once the launch cache's runner reads b by its
    address alone, it takes ``w`` itself: no ``w.t()`` view a call."""

    __slots__ = ("gemm", "k", "out_shape")

    def __init__(self, gemm: _Gemm, k: int, out_shape: tuple[int, ...] | None) -> None:
        self.gemm = gemm
        self.k = k
        self.out_shape = out_shape  # None: x is 2-D with a unit stride, run as it is

    def __call__(self, x: Tensor, w: Tensor, bias: Tensor | None) -> Tensor:
        if self.out_shape is not None:
            x = _unit_stride(x.reshape(-1, self.k))
        fast = self.gemm.fast_w
        out = fast(x, w, None, None, bias) if fast is not None else self.gemm(x, w.t(), bias)
        return out if self.out_shape is None else out.view(self.out_shape)


def _torch_linear(x: Tensor, w: Tensor, bias: Tensor | None) -> Tensor:
    return F.linear(x, w, bias)


def _linear_runner(x: Tensor, w: Tensor, bias: Tensor | None) -> Runner:
    """The runner of ``F.linear(x, w, bias)`` for x's and w's metadata."""
    if x.dtype != w.dtype or x.device != w.device or w.dim() != 2 or x.dim() == 0 or x.shape[-1] != w.shape[1]:
        return _torch_linear  # torch raises its own error (or broadcasts as F.linear does)
    if bias is not None and (bias.dtype != x.dtype or bias.device != x.device or tuple(bias.shape) != (w.shape[0],)):
        return _torch_linear
    reason = unsupported(x, w)
    if reason is not None:
        _warn_once(reason)
        return _torch_linear
    k, n = w.shape[1], w.shape[0]
    out_shape = (*x.shape[:-1], n)
    flat = x.dim() == 2 and (x.stride(-1) == 1 or x.stride(-2) == 1)
    x2 = x if flat else _unit_stride(x.reshape(-1, k))
    return _LinearGemm(_Gemm(x2, w.t(), _fp32_precision(x.dtype)), k, None if flat else out_shape)


def _torch_mm(a: Tensor, b: Tensor, bias: Tensor | None) -> Tensor:
    return torch.mm(a, b)


def _mm_runner(a: Tensor, b: Tensor, bias: Tensor | None) -> Runner:
    """The runner of ``a @ b`` (2-D) for their metadata."""
    if a.dim() != 2 or b.dim() != 2 or a.dtype != b.dtype or a.device != b.device or a.shape[1] != b.shape[0]:
        return _torch_mm  # torch raises its own error
    reason = unsupported(a, b)
    if reason is not None:
        _warn_once(reason)
        return _torch_mm
    unit = (a.stride(-1) == 1 or a.stride(-2) == 1) and (b.stride(-1) == 1 or b.stride(-2) == 1)
    run = _Gemm(_unit_stride(a), _unit_stride(b), _fp32_precision(a.dtype))
    if unit:
        return run
    return lambda a, b, bias: run(_unit_stride(a), _unit_stride(b), None)


def _meta(x: Tensor) -> tuple[Any, ...]:
    return (x.shape, x.stride(), x.dtype, x.device, x.data_ptr() & 15)


_LINEAR: dict[tuple[Any, ...], Runner] = {}
_MM: dict[tuple[Any, ...], Runner] = {}


def _cached(cache: dict[tuple[Any, ...], Runner], make: Callable[[Tensor, Tensor, Tensor | None], Runner],
            a: Tensor, b: Tensor, bias: Tensor | None) -> Tensor:  # fmt: skip
    key = (  # _key(a, b, bias) written out: one call less on the hot path
        a.shape, a.stride(), a.dtype, a.device, a.data_ptr() & 15, b.shape, b.stride(), b.dtype, b.device,
        b.data_ptr() & 15, None if bias is None else _meta(bias),
        torch.get_float32_matmul_precision() if a.dtype is torch.float32 else None,
    )  # fmt: skip
    run = cache.get(key)
    if run is None:
        run = _runner(cache, make, key, a, b, bias)
    return run(a, b, bias)


def _runner(cache: dict[tuple[Any, ...], Runner], make: Callable[[Tensor, Tensor, Tensor | None], Runner],
            key: tuple[Any, ...], a: Tensor, b: Tensor, bias: Tensor | None) -> Runner:  # fmt: skip
    """The runner cached under ``key`` (``_cached``'s key of these arguments), made on a miss."""
    run = cache.get(key)
    if run is None:
        run = make(a, b, bias)
        if len(cache) >= _CACHE_LIMIT:
            cache.clear()
        cache[key] = run
    return run


def _key(a: Tensor, b: Tensor, bias: Tensor | None) -> tuple[Any, ...]:
    """``_cached``'s key: what a runner depends on of its arguments and of torch's fp32 matmul setting."""
    return (
        a.shape, a.stride(), a.dtype, a.device, a.data_ptr() & 15, b.shape, b.stride(), b.dtype, b.device,
        b.data_ptr() & 15, None if bias is None else _meta(bias),
        torch.get_float32_matmul_precision() if a.dtype is torch.float32 else None,
    )  # fmt: skip


class _LinearGrad:
    """One linear call's metadata with a gradient recorded: the forward's runner (``_LINEAR``'s, shared with the
    no-grad path) and the backward GEMMs' runners, ``dX = dY @ W`` (layout nn) and ``dW = dY.T @ X`` (layout tn),
    resolved once per gradient metadata (strides, alignment, fp32 setting), so a repeated forward and backward pick,
    plan and key nothing of W's and X's again: a backward GEMM costs a key of dY and one direct launch."""

    __slots__ = ("forward", "x_shape", "n", "k", "fp32", "dx", "dw")

    def __init__(self, forward: Runner, x: Tensor, weight: Tensor) -> None:
        self.forward = forward
        self.x_shape = x.shape
        self.n, self.k = weight.shape
        self.fp32 = x.dtype is torch.float32
        self.dx: dict[tuple[Any, ...], Runner] = {}
        self.dw: dict[tuple[Any, ...], Runner] = {}

    def _backward_runner(self, found: dict[tuple[Any, ...], Runner], key: tuple[Any, ...], a: Tensor,
                         b: Tensor) -> Runner:  # fmt: skip
        if len(found) >= _GRAD_METAS:
            found.clear()
        run = found[key] = _runner(_MM, _mm_runner, _key(a, b, None), a, b, None)
        return run

    def grad_x(self, g2: Tensor, weight: Tensor) -> Tensor:
        """dX = dY [M, N] @ W [N, K], shaped as X."""
        key = (g2.stride(), g2.data_ptr() & 15, torch.get_float32_matmul_precision() if self.fp32 else None)
        run = self.dx.get(key) or self._backward_runner(self.dx, key, g2, weight)
        out = run(g2, weight, None)
        return out if len(self.x_shape) == 2 else out.reshape(self.x_shape)

    def grad_w(self, g2: Tensor, x: Tensor) -> Tensor:
        """dW = dY.T [N, M] (a transposed view) @ X [M, K]."""
        x2 = x if x.dim() == 2 else x.reshape(-1, self.k)
        gt = g2.t()
        key = (
            g2.stride(), g2.data_ptr() & 15, x2.stride(), x2.data_ptr() & 15,
            torch.get_float32_matmul_precision() if self.fp32 else None,
        )  # fmt: skip
        run = self.dw.get(key) or self._backward_runner(self.dw, key, gt, x2)
        return run(gt, x2, None)


_GRAD_METAS = 16  # gradient metadata kept per forward metadata (a training loop sees one or two)
_LINEAR_GRAD: dict[tuple[Any, ...], _LinearGrad | None] = {}
_MISSING = object()


def _linear_grad(x: Tensor, weight: Tensor, bias: Tensor | None) -> _LinearGrad | None:
    """The gradient entry of these arguments' metadata; None where torch's kernel runs the forward (a fallback, or
    arguments torch refuses or broadcasts): torch's own autograd then records it."""
    key = _key(x, weight, bias)
    entry = _LINEAR_GRAD.get(key, _MISSING)
    if entry is _MISSING:
        run = _runner(_LINEAR, _linear_runner, key, x, weight, bias)
        entry = None if run is _torch_linear else _LinearGrad(run, x, weight)
        if len(_LINEAR_GRAD) >= _CACHE_LIMIT:
            _LINEAR_GRAD.clear()
        _LINEAR_GRAD[key] = entry
    return entry  # type: ignore[return-value]


def linear_eager(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``F.linear`` through the bundled kernels without the dispatcher (no autograd record)."""
    return _cached(_LINEAR, _linear_runner, x, weight, bias)


def mm_eager(a: Tensor, b: Tensor) -> Tensor:
    """``a @ b`` (2-D) through the bundled kernels without the dispatcher (no autograd record)."""
    return _cached(_MM, _mm_runner, a, b, None)


def clear_caches() -> None:
    """Forget resolved runners (tests; a profile replaced in place) and which fallbacks have warned."""
    _traced.clear_recipes()
    _LINEAR.clear()
    _MM.clear()
    _LINEAR_GRAD.clear()
    _WARNED.clear()


# ---------------------------------------------------------------------------------------------
# the operators
# ---------------------------------------------------------------------------------------------
#
# Defined on a torch.library.Library rather than with torch.library.custom_op: custom_op wraps the kernel in
# Python layers that a compiled graph pays on every call (an autograd kernel that redispatches from Python, a
# backend wrapper that checks output aliasing, a dynamo-disable context around the function), several times the
# host time of the kernel launch itself.  Here the dispatcher calls one Python function per call: the autograd
# kernel below, which runs the cached runner directly when nothing between it and the CPU/CUDA kernel needs the
# dispatcher, and otherwise (a gradient to record, fake or functional tensors, a dispatch mode, a negative or
# conjugate view) does what custom_op's would.

_LIB = torch.library.Library("theodolite", "DEF")
_LIB.define("linear(Tensor x, Tensor weight, Tensor? bias) -> Tensor")
_LIB.define("mm(Tensor a, Tensor b) -> Tensor")

linear_op = torch.ops.theodolite.linear.default
"""``x @ weight.T + bias`` as ``F.linear``: x ``[..., K]``, weight ``[N, K]``, bias ``[N]`` or None."""
mm_op = torch.ops.theodolite.mm.default
"""``a @ b`` for 2-D a ``[M, K]`` and b ``[K, N]`` of any strides (one unit-stride dimension avoids a copy)."""


def _linear_kernel(x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    return _cached(_LINEAR, _linear_runner, x, weight, bias)


def _mm_kernel(a: Tensor, b: Tensor) -> Tensor:
    return _cached(_MM, _mm_runner, a, b, None)


@torch.library.register_fake("theodolite::linear", lib=_LIB)
def _linear_fake(x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    torch._check(weight.dim() == 2, lambda: f"theodolite::linear: weight must be 2-D, got {weight.dim()}-D")
    torch._check(x.dim() >= 1, lambda: "theodolite::linear: x must have at least one dimension")
    torch._check(
        x.shape[-1] == weight.shape[1],
        lambda: f"theodolite::linear: x has {x.shape[-1]} features, weight expects {weight.shape[1]}",
    )
    return x.new_empty((*x.shape[:-1], weight.shape[0]))


@torch.library.register_fake("theodolite::mm", lib=_LIB)
def _mm_fake(a: Tensor, b: Tensor) -> Tensor:
    torch._check(a.dim() == 2 and b.dim() == 2, lambda: "theodolite::mm: a and b must be 2-D")
    torch._check(a.shape[1] == b.shape[0], lambda: f"theodolite::mm: inner sizes differ ({a.shape[1]}, {b.shape[0]})")
    return a.new_empty((a.shape[0], b.shape[1]))


Grads = tuple[Tensor | None, Tensor | None, Tensor | None]


def _linear_save(ctx: Any, x: Tensor, weight: Tensor, need_x: bool, need_w: bool) -> None:
    """Save only what the backward reads, as the tensors themselves (no copy): W for dX, X for dW."""
    ctx.save_for_backward(x if need_w else None, weight if need_x else None)


def _linear_grads_op(grad: Tensor, x: Tensor | None, weight: Tensor | None, need_x: bool, need_w: bool,
                     need_b: bool) -> Grads:  # fmt: skip
    """The gradients through the operators: what autograd records where the backward is differentiated
    (``create_graph``) and what AOTAutograd or compiled autograd traces."""
    g2 = grad.reshape(-1, grad.shape[-1])
    grad_x = grad_w = grad_b = None
    if need_x:
        assert weight is not None
        grad_x = mm_op(g2, weight).reshape(*grad.shape[:-1], weight.shape[1])  # dY [M, N] @ W [N, K]: layout nn
    if need_w:
        assert x is not None
        grad_w = mm_op(g2.t(), x.reshape(-1, x.shape[-1]))  # dY.T [N, M] (a view) @ X [M, K]: layout tn
    if need_b:
        grad_b = g2.sum(0)
    return grad_x, grad_w, grad_b


def _mm_save(ctx: Any, a: Tensor, b: Tensor, need_a: bool, need_b: bool) -> None:
    ctx.save_for_backward(a if need_b else None, b if need_a else None)


def _mm_grads_op(grad: Tensor, a: Tensor | None, b: Tensor | None, need_a: bool,
                 need_b: bool) -> tuple[Tensor | None, Tensor | None]:  # fmt: skip
    grad_a = mm_op(grad, b.t()) if need_a and b is not None else None
    grad_b = mm_op(a.t(), grad) if need_b and a is not None else None
    return grad_a, grad_b


def _direct_apply(cls: type[torch.autograd.Function]) -> Callable[..., Any]:
    """``cls``'s C++ apply, without ``autograd.Function.apply``'s Python layer: that layer binds the arguments to
    ``forward``'s signature through ``inspect`` on every call of a ``setup_context`` Function (about two thirds of
    the host time of a linear with a gradient recorded) and unwraps functorch's dead wrappers.  The callers unwrap
    those themselves and take ``cls.apply`` under a functorch transform.  ``cls.apply`` where torch lacks it."""
    direct = getattr(super(torch.autograd.Function, cls), "apply", None)
    if direct is None or type(direct).__name__ != "builtin_function_or_method":
        return cls.apply
    return direct  # type: ignore[no-any-return]


def _functorch_active_py() -> bool:
    return True  # unknown: take autograd.Function.apply, which handles every case


_functorch_active: Callable[[], bool] = getattr(torch._C, "_are_functorch_transforms_active", _functorch_active_py)
_unwrap: Callable[[Tensor], Tensor] = getattr(getattr(torch._C, "_functorch", None), "unwrap_if_dead", lambda t: t)


def _any_requires_grad_py(*tensors: Tensor | None) -> bool:
    return any(t is not None and t.requires_grad for t in tensors)


_any_requires_grad: Callable[..., bool] = getattr(torch._C, "_any_requires_grad", _any_requires_grad_py)
_BELOW_AUTOGRAD = torch._C._after_autograd_keyset
_VIEW_TRACKING = torch._C.DispatchKey.ADInplaceOrView  # a fallthrough for a functional operator
_BACKENDS = (torch._C.DispatchKey.CPU, torch._C.DispatchKey.CUDA)


_ROUTES: dict[int, tuple[torch._C.DispatchKeySet, bool]] = {}


def _route(keyset: torch._C.DispatchKeySet) -> tuple[torch._C.DispatchKeySet, bool]:
    """The keys below autograd, and whether the dispatcher's next stop would be the CPU/CUDA kernel itself (no
    Python key: fake or subclass tensors, a dispatch mode; no functionalization; no negative or conjugate view to
    materialize first).  Cached per key set: the check costs microseconds in pybind calls, a lookup does not."""
    raw = keyset.raw_repr()
    found = _ROUTES.get(raw)
    if found is None:
        below = keyset & _BELOW_AUTOGRAD
        found = _ROUTES[raw] = (below, below.remove(_VIEW_TRACKING).highestPriorityTypeId() in _BACKENDS)
    return found


def _redispatch(op: Any, below: torch._C.DispatchKeySet, *args: Any) -> Tensor:
    with torch._C._AutoDispatchBelowAutograd():
        return op.redispatch(below, *args)  # type: ignore[no-any-return]


class _LinearOpFunction(torch.autograd.Function):
    """The operator's autograd where a gradient is recorded (eager or traced by AOTAutograd)."""

    @staticmethod
    def forward(ctx: Any, route: tuple[torch._C.DispatchKeySet, bool], x: Tensor, weight: Tensor,
                bias: Tensor | None) -> Tensor:  # fmt: skip
        _, need_x, need_w, need_b = ctx.needs_input_grad
        _linear_save(ctx, x, weight, need_x, need_w)
        ctx.need_b = need_b and bias is not None
        below, direct = route
        if direct:  # the dispatcher's next stop is the CPU/CUDA kernel: call it
            return _cached(_LINEAR, _linear_runner, x, weight, bias)
        return _redispatch(linear_op, below, x, weight, bias)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[None, Tensor | None, Tensor | None, Tensor | None]:
        x, weight = ctx.saved_tensors
        _, need_x, need_w, _ = ctx.needs_input_grad
        return (None, *_linear_grads_op(grad, x, weight, need_x, need_w, ctx.need_b))


class _MmOpFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, route: tuple[torch._C.DispatchKeySet, bool], a: Tensor, b: Tensor) -> Tensor:
        _, need_a, need_b = ctx.needs_input_grad
        _mm_save(ctx, a, b, need_a, need_b)
        below, direct = route
        if direct:
            return _cached(_MM, _mm_runner, a, b, None)
        return _redispatch(mm_op, below, a, b)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[None, Tensor | None, Tensor | None]:
        a, b = ctx.saved_tensors
        _, need_a, need_b = ctx.needs_input_grad
        return (None, *_mm_grads_op(grad, a, b, need_a, need_b))


_LINEAR_OP_APPLY = _direct_apply(_LinearOpFunction)
_MM_OP_APPLY = _direct_apply(_MmOpFunction)


def _linear_autograd(keyset: torch._C.DispatchKeySet, x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    route = _route(keyset)
    below, direct = route
    if torch.is_grad_enabled() and _any_requires_grad(x, weight, bias):
        if _functorch_active():
            return _LinearOpFunction.apply(route, x, weight, bias)  # type: ignore[no-any-return]
        bias = bias if bias is None else _unwrap(bias)
        return _LINEAR_OP_APPLY(route, _unwrap(x), _unwrap(weight), bias)  # type: ignore[no-any-return]
    if direct:
        return _cached(_LINEAR, _linear_runner, x, weight, bias)
    return _redispatch(linear_op, below, x, weight, bias)


def _mm_autograd(keyset: torch._C.DispatchKeySet, a: Tensor, b: Tensor) -> Tensor:
    route = _route(keyset)
    below, direct = route
    if torch.is_grad_enabled() and _any_requires_grad(a, b):
        if _functorch_active():
            return _MmOpFunction.apply(route, a, b)  # type: ignore[no-any-return]
        return _MM_OP_APPLY(route, _unwrap(a), _unwrap(b))  # type: ignore[no-any-return]
    if direct:
        return _cached(_MM, _mm_runner, a, b, None)
    return _redispatch(mm_op, below, a, b)


def _no_dynamo(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` as a dispatcher kernel that dynamo leaves alone, it and all it calls, when the dispatcher runs it under
    a compiling frame (an eager call at a graph break), as custom_op's ``torch._disable_dynamo`` wrapper does, but
    at no cost per call: a flag on the code object (torch's own ``skip_code``, made recursive).  Where that private
    hook is missing, the public ``torch.compiler.disable`` wrapper (a context switch per call) instead."""
    try:
        from torch._C._dynamo.eval_frame import _FrameAction, _FrameExecStrategy, set_code_exec_strategy

        set_code_exec_strategy(fn.__code__, _FrameExecStrategy(_FrameAction.SKIP, _FrameAction.SKIP))
    except (ImportError, AttributeError, TypeError):
        return torch.compiler.disable(fn)
    return fn


# the backend kernels on every device: CPU and CUDA run the bundled kernels, any other device falls back to torch's
_LIB.impl("linear", _no_dynamo(_linear_kernel), "CompositeExplicitAutograd")
_LIB.impl("mm", _no_dynamo(_mm_kernel), "CompositeExplicitAutograd")
_LIB.impl("linear", _no_dynamo(_linear_autograd), "Autograd", with_keyset=True)
_LIB.impl("mm", _no_dynamo(_mm_autograd), "Autograd", with_keyset=True)


class _EagerLinear(torch.autograd.Function):
    """Eager autograd of ``linear`` without the dispatcher's round trip: the forward runs the metadata's cached
    runner (``entry``, a ``_LinearGrad`` resolved before the call), the backward its cached backward runners; the
    operators' backward where the backward itself is recorded or traced."""

    @staticmethod
    def forward(x: Tensor, weight: Tensor, bias: Tensor | None, entry: _LinearGrad | None) -> Tensor:
        if entry is None:  # under a functorch transform
            return _cached(_LINEAR, _linear_runner, x, weight, bias)
        return entry.forward(x, weight, bias)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Tensor) -> None:
        x, weight, bias, ctx.entry = inputs
        need_x, need_w, need_b, _ = ctx.needs_input_grad
        _linear_save(ctx, x, weight, need_x, need_w)
        ctx.need_b = need_b and bias is not None

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, Tensor | None, Tensor | None, None]:
        x, weight = ctx.saved_tensors
        need_x, need_w, _, _ = ctx.needs_input_grad
        entry: _LinearGrad | None = ctx.entry
        if (
            entry is None or type(grad) is not Tensor or torch.is_grad_enabled() or grad.is_neg()
            or torch._C._len_torch_dispatch_stack()
        ):  # fmt: skip
            return (*_linear_grads_op(grad, x, weight, need_x, need_w, ctx.need_b), None)
        g2 = grad if grad.dim() == 2 else grad.reshape(-1, entry.n)
        return (
            entry.grad_x(g2, weight) if need_x else None,
            entry.grad_w(g2, x) if need_w else None,
            g2.sum(0) if ctx.need_b else None,
            None,
        )


_EAGER_LINEAR_APPLY = _direct_apply(_EagerLinear)


def _plain(x: Tensor, weight: Tensor, bias: Tensor | None) -> bool:
    """Nothing needs the dispatcher: plain tensors, no autograd record, no dispatch mode (fake tensors, profilers
    of the dispatcher, functionalization)."""
    if type(x) is not Tensor or torch._C._len_torch_dispatch_stack():
        return False
    if not torch.is_grad_enabled():
        return True
    return not (x.requires_grad or weight.requires_grad or (bias is not None and bias.requires_grad))


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``F.linear(x, weight, bias)`` through the bundled kernels: the registered operator under compile (the traced
    one, ``traced_ops``, where ``THEODOLITE_TRACED_LINEAR=1`` and no gradient is recorded), a tensor subclass or a
    dispatch mode; else the cached runner directly (the same kernels, less host time), inside an
    autograd.Function applied from C++ where a gradient is recorded (the operator's autograd kernel costs more host
    time: the dispatcher's round trip); torch's own F.linear and autograd where its kernel would run anyway."""
    if torch.compiler.is_compiling():
        if _traced.ENABLED and not (
            torch.is_grad_enabled()
            and (x.requires_grad or weight.requires_grad or (bias is not None and bias.requires_grad))
        ):
            return _traced.linear_traced_op(x, weight, bias)  # type: ignore[no-any-return]
        return linear_op(x, weight, bias)
    if type(x) is not Tensor or torch._C._len_torch_dispatch_stack():
        return linear_op(x, weight, bias)
    if torch.is_grad_enabled() and (
        x.requires_grad or weight.requires_grad or (bias is not None and bias.requires_grad)
    ):
        if _functorch_active():  # x may be a transform's wrapper: the runner is resolved on the unwrapped tensors
            return _EagerLinear.apply(x, weight, bias, None)  # type: ignore[no-any-return]
        x, weight, bias = _unwrap(x), _unwrap(weight), bias if bias is None else _unwrap(bias)
        entry = _linear_grad(x, weight, bias)
        if entry is None:  # torch's kernel runs it (a fallback, or arguments torch refuses): torch's autograd too
            return F.linear(x, weight, bias)
        return _EAGER_LINEAR_APPLY(x, weight, bias, entry)  # type: ignore[no-any-return]
    return _cached(_LINEAR, _linear_runner, x, weight, bias)


def mm(a: Tensor, b: Tensor) -> Tensor:
    """``a @ b`` (2-D) through the bundled kernels; as ``linear``, the operator only where something needs it."""
    if torch.compiler.is_compiling() or not _plain(a, b, None):
        return mm_op(a, b)
    return _cached(_MM, _mm_runner, a, b, None)


from theodolite import traced_ops as _traced  # noqa: E402  (after the operators it falls back to are registered)

__all__ = ["clear_caches", "linear", "linear_eager", "linear_op", "mm", "mm_eager", "mm_op", "unsupported"]
