"""``theodolite::linear_traced``: ``F.linear`` for torch.compile graphs, whose kernel launch Inductor generates itself.

Inside a compiled graph ``theodolite::linear`` is an opaque call: Inductor's code calls it through the dispatcher into
Python, which finds the runner and launches the kernel, and that costs the host more than F.linear's extern call
(H200 host, eight chained 1024-wide layers: 30-52 µs a projection against 22-35).  Behind a
``torch.library.triton_op`` the same kernel costs the host 18-30 µs (``experiments/compiled_launch_path.py``): the
graph is traced through the operator's body, so Inductor sees the kernel (``wrap_triton``) and launches it from its
generated code.

The body picks the config (the model, as ``ops.linear`` does) and plans the launch once per argument metadata, on
real tensors of the same sizes and strides made for that purpose (a traced call holds fake tensors, whose addresses
``plan_gemm`` cannot read; Inductor's buffers are 16-byte aligned, and a view that is not runs the opaque operator):
while a graph compiles, each new metadata briefly holds device memory the size of its operands.
A plan it can express as one traced launch (one kernel, no operand copy, every argument the call's own tensor or a
scratch buffer the body allocates: split-K's and Stream-K's workspace and arrival counters) becomes a ``Recipe``;
anything else (TMA configs, whose descriptors or global scratch are not traced yet; symbolic sizes under dynamic
shapes; an aligned copy; a misaligned view) runs ``theodolite::linear`` from inside the body, as before.

Off unless ``THEODOLITE_TRACED_LINEAR=1``: the compiled path has not been timed on a GPU yet (``ops.linear`` reads
``ENABLED``).  No autograd: ``ops.linear`` takes it only where no gradient is recorded.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

ENABLED = os.environ.get("THEODOLITE_TRACED_LINEAR", "0") == "1"
ALIGN = 16  # bytes: the kernels' (and Inductor's buffers') alignment


@dataclass(frozen=True)
class Scratch:
    """A buffer the traced body allocates for each call: zeros (arrival counters) or uninitialised (a workspace)."""

    numel: int
    dtype: torch.dtype
    zeroed: bool


# what each positional kernel argument is: the call's x (0), weight (1), output (2), bias (4), or a Scratch
Source = int | Scratch


@dataclass(frozen=True)
class Recipe:
    """One traced launch of a picked config: the kernel, its grid, each positional argument's source, the keywords."""

    config_key: str
    kernel: Any
    grid: tuple[int, ...]
    sources: tuple[Source, ...]
    kwargs: dict[str, Any]


_RECIPES: dict[tuple[Any, ...], Recipe | None] = {}
_CACHE_LIMIT = 1024
_OPERAND_SOURCES = (0, 1, 2, 4)  # gemm()'s a, b, out, bias (``kernels.launch.plan_gemm``'s sources)


def _concrete(*sizes: Any) -> bool:
    return all(type(s) is int for s in sizes)


def _aligned(x: Tensor) -> bool:
    """Whether x's first element sits on a 16-byte boundary as far as this call can know it: its storage offset for a
    fake tensor (Inductor's buffers are aligned), its address for a real one."""
    if isinstance(x, torch._subclasses.fake_tensor.FakeTensor):
        offset = x.storage_offset()
        return type(offset) is int and (offset * x.element_size()) % ALIGN == 0  # a symbolic offset: no guard on it
    return x.data_ptr() % ALIGN == 0


def recipe_key(x2: Tensor, weight: Tensor, bias: Tensor | None) -> tuple[Any, ...] | None:
    """What a recipe depends on of the arguments (None: sizes that are not plain ints, as under dynamic shapes)."""
    sizes = (*x2.shape, *x2.stride(), *weight.shape, *weight.stride())
    if bias is not None:
        sizes = (*sizes, *bias.shape, *bias.stride())
    if not _concrete(*sizes):
        return None
    precision = torch.get_float32_matmul_precision() if x2.dtype is torch.float32 else None
    return (
        tuple(x2.shape), x2.stride(), tuple(weight.shape), weight.stride(), x2.dtype, x2.device.type,
        None if bias is None else (tuple(bias.shape), bias.stride()), precision,
    )  # fmt: skip


def _stand_ins(x2: Tensor, weight: Tensor, bias: Tensor | None) -> tuple[Tensor, Tensor, Tensor | None]:
    """Real, aligned tensors with the arguments' sizes, strides, dtype and device (fake ones have no address)."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    def real(t: Tensor) -> Tensor:
        return torch.empty_strided(tuple(t.shape), t.stride(), dtype=t.dtype, device=t.device)

    with unset_fake_temporarily():
        return real(x2), real(weight), None if bias is None else real(bias)


def make_recipe(x2: Tensor, weight: Tensor, bias: Tensor | None) -> Recipe | None:
    """The traced launch of ``x2 @ weight.T + bias`` with the model's pick, or None where a plan is not one kernel over
    the call's tensors and scratch buffers (module docstring)."""
    from theodolite import api
    from theodolite.kernels.buffers import fresh_scratch
    from theodolite.kernels.config import ConfigError
    from theodolite.kernels.direct_launch import _Launch
    from theodolite.kernels.launch import plan_gemm, problem_of
    from theodolite.ops import _fp32_precision, unsupported

    if unsupported(x2, weight) is not None:
        return None
    a, w, b = _stand_ins(x2, weight, bias)
    precision = _fp32_precision(a.dtype)
    profile = api.resolve(None)
    config = api.select_problem(problem_of(a, w.t(), None, precision), profile).config
    if config.variant == "tma":
        return None
    try:
        with fresh_scratch():
            plan = plan_gemm(a, w.t(), config, bias=b, num_sms=int(profile.value("sm_count")), precision=precision)
    except ConfigError:
        return None
    if len(plan.steps) != 1 or not isinstance(plan.steps[0], _Launch):
        return None
    launch = plan.steps[0]
    sources: list[Source] = []
    for arg, source in zip(launch.args, launch.sources, strict=True):
        if source in _OPERAND_SOURCES:
            sources.append(source)  # type: ignore[arg-type]
        elif source is None and isinstance(arg, Tensor) and arg.dtype in (torch.float32, torch.int32):
            sources.append(Scratch(arg.numel(), arg.dtype, zeroed=arg.dtype is torch.int32))
        else:
            return None
    return Recipe(config.key, launch.kernel, tuple(launch.grid), tuple(sources), dict(launch.kwargs))


def recipe_for(x2: Tensor, weight: Tensor, bias: Tensor | None) -> Recipe | None:
    """``make_recipe``, cached per argument metadata; None for symbolic sizes (checked first: no guard is added on
    them) or a misaligned argument."""
    key = recipe_key(x2, weight, bias)
    if key is None or not (_aligned(x2) and _aligned(weight) and (bias is None or _aligned(bias))):
        return None
    if key not in _RECIPES:
        if len(_RECIPES) >= _CACHE_LIMIT:
            _RECIPES.clear()
        _RECIPES[key] = make_recipe(x2, weight, bias)
    return _RECIPES[key]


def clear_recipes() -> None:
    """Forget the recipes (a profile replaced in place; tests)."""
    _RECIPES.clear()


def _arguments(recipe: Recipe, x2: Tensor, weight: Tensor, out: Tensor, bias: Tensor | None) -> list[Tensor]:
    args: list[Tensor] = []
    for source in recipe.sources:
        if isinstance(source, Scratch):
            make = torch.zeros if source.zeroed else torch.empty
            args.append(make(source.numel, dtype=source.dtype, device=x2.device))
        elif source == 0:
            args.append(x2)
        elif source == 1:
            args.append(weight)
        elif source == 4 and bias is not None:
            args.append(bias)
        else:
            args.append(out)  # the output, or the kernels' stand-in for an absent c, bias or scale
    return args


@torch.library.triton_op("theodolite::linear_traced", mutates_args=())
def linear_traced(x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    """``F.linear(x, weight, bias)``, its kernel launched from the traced graph where a recipe covers the call."""
    n, k = weight.shape
    x2 = x.reshape(-1, k)
    recipe = recipe_for(x2, weight, bias)
    if recipe is None:
        return torch.ops.theodolite.linear.default(x, weight, bias)
    out = torch.empty((x2.shape[0], n), dtype=x.dtype, device=x.device)
    args = _arguments(recipe, x2, weight, out, bias)
    torch.library.wrap_triton(recipe.kernel)[recipe.grid](*args, **recipe.kwargs)
    return out.view(*x.shape[:-1], n)


linear_traced_op = torch.ops.theodolite.linear_traced.default

__all__ = [
    "ENABLED",
    "Recipe",
    "Scratch",
    "clear_recipes",
    "linear_traced",
    "linear_traced_op",
    "make_recipe",
    "recipe_for",
]
