"""gemm()'s inputs: validate the tensors and describe each operand as the kernels see it.

``problem_of`` turns ``a @ b`` into a ``Problem`` (sizes, dtype name, layout, row alignment), raising a
``ConfigError`` that names what is wrong before anything launches; ``_operand`` gives the 3-D view, the
contiguous dimension, leading and batch strides of one input; ``_unaligned_vec`` the vector width of rows that
are not 16-byte aligned; ``scale_rule`` how the fp8 scales (per tensor or rowwise) reach the epilogue.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from theodolite.kernels.config import ConfigError, Problem, partial_vectors_enabled, vector_elements

_TORCH_TO_NAME: dict[torch.dtype, str] = {
    torch.float16: "fp16",
    torch.bfloat16: "bf16",
    torch.float32: "tf32",
    torch.float8_e4m3fn: "fp8e4m3",
    torch.float8_e5m2: "fp8e5m2",
}
_NAME_TO_TORCH: dict[str, torch.dtype] = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}
_OUT_ALIASES: dict[Any, str] = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32"}


@dataclass
class _Operand:
    """One input as the kernels see it: 3-D view, which dimension is contiguous, leading and batch strides."""

    tensor: torch.Tensor  # [batch or 1, rows, cols] view
    row_major: bool
    ld: int
    batch_stride: int
    aligned: bool
    extent: int  # extent of the contiguous dimension as stored (padded after an aligned copy)
    contiguous_is_k: bool


def _is_tensor(x: Any, name: str) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise ConfigError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    return x


def _dtype_name(a: torch.Tensor, b: torch.Tensor, precision: str | None) -> str:
    if a.dtype != b.dtype:
        raise ConfigError(f"a and b must have the same dtype, got {a.dtype} and {b.dtype}")
    name = _TORCH_TO_NAME.get(a.dtype)
    if name is None:
        raise ConfigError(
            f"unsupported dtype {a.dtype}; expected float16, bfloat16, float32, float8_e4m3fn or float8_e5m2"
        )
    if precision not in (None, "tf32", "ieee"):
        raise ConfigError(f"precision must be 'tf32' or 'ieee', got {precision!r}")
    if precision is not None and name != "tf32":
        raise ConfigError(f"precision={precision!r} applies to float32 inputs only, not {a.dtype}")
    if name == "tf32" and precision == "ieee":
        return "fp32"
    return name


def _shapes(a: torch.Tensor, b: torch.Tensor) -> tuple[int, int, int, int]:
    if a.dim() not in (2, 3) or b.dim() not in (2, 3):
        raise ConfigError(f"a and b must be 2-D or 3-D (batched), got {a.dim()}-D and {b.dim()}-D")
    if a.shape[-1] != b.shape[-2]:
        raise ConfigError(f"inner dimensions differ: a is {tuple(a.shape)}, b is {tuple(b.shape)}")
    batch_a = a.shape[0] if a.dim() == 3 else 1
    batch_b = b.shape[0] if b.dim() == 3 else 1
    if a.dim() == 3 and b.dim() == 3 and batch_a != batch_b:
        raise ConfigError(f"batch sizes differ: a is {tuple(a.shape)}, b is {tuple(b.shape)}")
    batch = max(batch_a, batch_b) if (a.dim() == 3 or b.dim() == 3) else 1
    if a.dim() == 3 and b.dim() == 2:
        batch = batch_a
    if b.dim() == 3 and a.dim() == 2:
        batch = batch_b
    return batch, int(a.shape[-2]), int(b.shape[-1]), int(a.shape[-1])


def _operand(x: torch.Tensor, batch: int, k_is_cols: bool, vec: int) -> _Operand:
    """Describe x ([.., rows, cols]); a tensor with neither dimension contiguous is copied first."""
    x3 = x if x.dim() == 3 else x.unsqueeze(0)
    rows, cols = x3.shape[-2], x3.shape[-1]
    s_rows, s_cols = x3.stride(-2), x3.stride(-1)
    if s_cols == 1 or cols == 1:
        row_major = True
    elif s_rows == 1 or rows == 1:
        row_major = False
    else:
        x3 = x3.contiguous()
        row_major, s_rows, s_cols = True, x3.stride(-2), 1
    if row_major:
        ld = s_rows if rows > 1 else -(-cols // vec) * vec
        contiguous_size, contiguous_is_k = cols, k_is_cols
    else:
        ld = s_cols if cols > 1 else -(-rows // vec) * vec
        contiguous_size, contiguous_is_k = rows, not k_is_cols
    batch_stride = x3.stride(0) if x3.shape[0] > 1 else 0
    if x3.shape[0] == 1 and batch > 1:
        x3 = x3.expand(batch, rows, cols)
    aligned = (
        x3.data_ptr() % 16 == 0
        and ld % vec == 0
        and batch_stride % vec == 0
        and (contiguous_is_k or contiguous_size % vec == 0)
    )
    return _Operand(x3, row_major, ld, batch_stride, aligned, contiguous_size, contiguous_is_k)


def _layout(a_op: _Operand, b_op: _Operand) -> str:
    return ("n" if a_op.row_major else "t") + ("n" if b_op.row_major else "t")


def problem_of(
    a: torch.Tensor, b: torch.Tensor, out_dtype: str | torch.dtype | None = None, precision: str | None = None
) -> Problem:
    """The Problem (sizes, dtype name, layout, row alignment) of ``a @ b``, validating the inputs."""
    a = _is_tensor(a, "a")
    b = _is_tensor(b, "b")
    if a.device != b.device:
        raise ConfigError(f"a and b are on different devices ({a.device} and {b.device})")
    dtype = _dtype_name(a, b, precision)
    batch, m, n, k = _shapes(a, b)
    vec = vector_elements(dtype)
    a_op = _operand(a, batch, True, vec)
    b_op = _operand(b, batch, False, vec)
    return Problem(
        m,
        n,
        k,
        dtype=dtype,
        batch=batch,
        layout=_layout(a_op, b_op),
        out_dtype=_out_name(out_dtype),
        a_row_stride_aligned=a_op.aligned,
        b_row_stride_aligned=b_op.aligned,
    )


def _out_name(out_dtype: str | torch.dtype | None) -> str | None:
    if out_dtype is None:
        return None
    if isinstance(out_dtype, torch.dtype):
        if out_dtype not in _OUT_ALIASES:
            raise ConfigError(f"unsupported output dtype {out_dtype}; expected float16, bfloat16 or float32")
        return _OUT_ALIASES[out_dtype]
    if out_dtype not in _NAME_TO_TORCH:
        raise ConfigError(f"unsupported output dtype {out_dtype!r}; expected fp16, bf16 or fp32")
    return out_dtype


def _unaligned_vec(op: _Operand, vec: int) -> int:
    """A_VEC/B_VEC of an operand whose rows are not 16-byte aligned (and not copied): the largest power of
    two below ``vec`` dividing its base (in elements), row and batch strides and contiguous extent, so its
    loads stay 4- or 8-byte copies Triton's pipeliner makes asynchronous (``cp.async`` moves 4, 8 or 16
    bytes: narrower element-wise loads stay synchronous and each K step waits a memory latency)."""
    if not partial_vectors_enabled():
        return 1
    bits = op.tensor.data_ptr() // op.tensor.element_size() | op.ld | op.batch_stride | op.extent
    return min(vec // 2, bits & -bits)  # the lowest set bit: the largest power of two dividing all four


ScaleRule = Callable[[Any, Any], tuple[torch.Tensor, torch.Tensor | None]]

# HAS_SCALE, the epilogue's scale form (kernels.epilogue.epilogue_at): which of its two scale pointers carry what.
# One element scales the whole product (per tensor); a vector of M (rows of A) or N (columns of B) scales its rows or
# columns (rowwise, as torch._scaled_mm takes scale_a [M, 1] and scale_b [1, N]).
SCALE_NONE, SCALE_ONE, SCALE_TWO = 0, 1, 2  # no scale; one element; one element each
SCALE_ROWS_COLS, SCALE_ROWS, SCALE_COLS = 3, 4, 5  # rows and columns; rows alone; columns alone (first pointer)
SCALE_ROWS_ONE, SCALE_COLS_ONE = 6, 7  # rows or columns (first pointer) and one element (second)


def _fp32_vector(x: torch.Tensor) -> torch.Tensor:
    """A row or column scale as the epilogue reads it: float32, its elements consecutive."""
    if x.dtype is torch.float32 and x.is_contiguous():
        return x
    return x.to(torch.float32).contiguous()


def _scale_a(a_scale: torch.Tensor, b_scale: Any) -> tuple[torch.Tensor, None]:
    return a_scale, None


def _scale_b(a_scale: Any, b_scale: torch.Tensor) -> tuple[torch.Tensor, None]:
    return b_scale, None


def _scale_both(a_scale: torch.Tensor, b_scale: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return a_scale, b_scale  # both float32: the epilogue loads and multiplies the two (no launch of their own)


def _scale_a_fp32(a_scale: torch.Tensor, b_scale: Any) -> tuple[torch.Tensor, None]:
    return a_scale.to(torch.float32), None


def _scale_b_fp32(a_scale: Any, b_scale: torch.Tensor) -> tuple[torch.Tensor, None]:
    return b_scale.to(torch.float32), None


def _scale_both_fp32(a_scale: torch.Tensor, b_scale: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return a_scale.to(torch.float32), b_scale.to(torch.float32)


def _rows_cols(a_scale: torch.Tensor, b_scale: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return _fp32_vector(a_scale), _fp32_vector(b_scale)


def _rows(a_scale: torch.Tensor, b_scale: Any) -> tuple[torch.Tensor, None]:
    return _fp32_vector(a_scale), None


def _cols(a_scale: Any, b_scale: torch.Tensor) -> tuple[torch.Tensor, None]:
    return _fp32_vector(b_scale), None


def _rows_one(a_scale: torch.Tensor, b_scale: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return _fp32_vector(a_scale), b_scale.to(torch.float32)


def _cols_one(a_scale: torch.Tensor, b_scale: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return _fp32_vector(b_scale), a_scale.to(torch.float32)


def _scale_kind(name: str, value: torch.Tensor, length: int, batch: int, what: str) -> str:
    """'one' (a per-tensor scale) or 'vector' (one per row of A / column of B), else a ConfigError naming both forms."""
    if value.numel() == 1:
        return "one"
    shapes = ((length, 1), (length,)) if name == "scale_a" else ((1, length), (length,))
    if tuple(value.shape) in shapes and batch == 1:
        return "vector"
    rowwise = " x ".join(map(str, shapes[0]))
    raise ConfigError(
        f"{name} must be a per-tensor scale (one element) or one per {what} ([{rowwise}], rowwise as "
        f"torch._scaled_mm{'' if batch == 1 else ', 2-D problems only'}), got shape {tuple(value.shape)}"
    )


def scale_rule(
    a_scale: Any, b_scale: Any, device: torch.device, m: int = 1, n: int = 1, batch: int = 1
) -> tuple[ScaleRule | None, float, int]:
    """How a call's fp8 scales reach the epilogue: (rule, number, HAS_SCALE).

    Per-tensor scales are one element each; rowwise ones (as ``torch._scaled_mm``) one per row of A (``scale_a``
    [M, 1] or [M]) and one per column of B (``scale_b`` [1, N] or [N]), for a 2-D problem.  ``rule(a_scale,
    b_scale)`` gives what the epilogue's two scale pointers load (None: no tensor scale): float32 tensors are passed
    as they are (a vector when its elements are consecutive), others converted first; ``number`` is the product of
    the scales given as Python numbers, folded into ``alpha`` on the host; HAS_SCALE the epilogue's form of the two
    (``SCALE_*``).  The rule depends only on which scales are tensors, their dtypes, shapes and strides (the launch
    cache's key holds them), so a cached launch re-applies it to each call's scales: the values are never read on
    the host (no synchronization; CUDA graphs can capture the call, and a scale updated in place between calls is
    read anew)."""
    if a_scale is None and b_scale is None:
        return None, 1.0, SCALE_NONE
    tensors: list[tuple[int, torch.Tensor, str]] = []
    number = 1.0
    for slot, name, value, length, what in (
        (0, "scale_a", a_scale, m, "row of a"), (1, "scale_b", b_scale, n, "column of b"),
    ):  # fmt: skip
        if value is None:
            continue
        if isinstance(value, torch.Tensor):
            kind = _scale_kind(name, value, length, batch, what)
            if not value.is_floating_point():
                raise ConfigError(
                    f"{name} must be a floating-point tensor (float32, as torch._scaled_mm), got {value.dtype}"
                )
            if value.device != device:
                raise ConfigError(f"{name} is on {value.device}, the inputs on {device}")
            tensors.append((slot, value, kind))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            number *= float(value)
        else:
            raise ConfigError(f"{name} must be a float or a tensor (per tensor or rowwise), got {type(value).__name__}")
    if not tensors:
        return None, number, SCALE_NONE
    kinds = {slot: kind for slot, _, kind in tensors}
    if "vector" not in kinds.values():
        fp32 = all(t.dtype == torch.float32 for _, t, _ in tensors)
        if len(tensors) == 2:
            return (_scale_both if fp32 else _scale_both_fp32), number, SCALE_TWO
        if tensors[0][0] == 0:
            return (_scale_a if fp32 else _scale_a_fp32), number, SCALE_ONE
        return (_scale_b if fp32 else _scale_b_fp32), number, SCALE_ONE
    a_kind, b_kind = kinds.get(0), kinds.get(1)
    if a_kind == "vector" and b_kind == "vector":
        return _rows_cols, number, SCALE_ROWS_COLS
    if a_kind == "vector":
        return (_rows, number, SCALE_ROWS) if b_kind is None else (_rows_one, number, SCALE_ROWS_ONE)
    return (_cols, number, SCALE_COLS) if a_kind is None else (_cols_one, number, SCALE_COLS_ONE)


def _scale_tensor(a_scale: Any, b_scale: Any, device: torch.device) -> torch.Tensor | None:
    """One fp32 element on the device, the product of the per-tensor scales (``scale_rule`` with the numbers
    multiplied in); None without scales."""
    rule, number, _ = scale_rule(a_scale, b_scale, device)
    if rule is None:
        return None if a_scale is None and b_scale is None else torch.full((1,), number, dtype=torch.float32,
                                                                           device=device)  # fmt: skip
    first, second = rule(a_scale, b_scale)
    scale = first.reshape(1) if second is None else first.reshape(1) * second.reshape(1)
    return scale * number if number != 1.0 else scale
