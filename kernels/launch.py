"""``gemm()`` and ``problem_of()``: validate tensors, derive the Problem, plan and launch one config.

Everything a user can get wrong is checked here, before any launch, and raised as a
``ConfigError`` (a ``TheodoliteError``) naming the problem.

fp32 inputs: tensor-core tf32 by default (Problem dtype ``"tf32"``); pass ``precision="ieee"``
for full fp32 math (Problem dtype ``"fp32"``, no tensor cores).

This module plans (``plan_gemm``: the kernel's arguments and its epilogue's vector promises) and runs
(``gemm``); its parts live beside it: ``operands`` (input checks, ``problem_of``), ``direct_launch`` (one
launch, device limits), ``buffers`` (workspace, locks, padded copies) and ``launch_cache`` (gemm()'s cache).
Their names are re-exported here: import from ``theodolite.kernels.launch``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from theodolite.kernels.buffers import (  # noqa: F401  (re-exported)
    _LOCKS,
    _WORKSPACES,
    _aligned_copy,
    _AlignedCopy,
    _locks,
    _workspace,
)
from theodolite.kernels.config import (  # noqa: F401  (DTYPE_BYTES, KernelLimits: re-exported)
    DTYPE_BYTES,
    SCALAR_OFFSET_MAX_ROW,
    TAIL_CHUNKS,
    ConfigError,
    GemmConfig,
    KernelLimits,
    Problem,
    cooperative_reduction,
    edge_mask,
    issued_widths,
    legality,
    needs_aligned_copy,
    programs_per_sm,
    streamk_partition,
    vector_elements,
)
from theodolite.kernels.direct_launch import (  # noqa: F401  (re-exported)
    _ENCODED,
    _ENCODED_MAX,
    KernelLaunchError,
    _Descriptor,
    _direct_launcher,
    _encoded_descriptors,
    _ensure_allocator,
    _hooks_idle,
    _Launch,
    _tensor_descriptor_class,
    device_limits,
    fast_launch_enabled,
    host_descriptors_enabled,
    interpreting,
    is_launch_failure,
)
from theodolite.kernels.launch_cache import _FAST, _FAST_MAX, _NUMBER, _fast_key, _FastGemm, _meta  # noqa: F401
from theodolite.kernels.operands import (  # noqa: F401  (re-exported)
    _NAME_TO_TORCH,
    _OUT_ALIASES,
    _TORCH_TO_NAME,
    ScaleRule,
    _dtype_name,
    _is_tensor,
    _layout,
    _Operand,
    _operand,
    _out_name,
    _scale_tensor,
    _shapes,
    _unaligned_vec,
    problem_of,
    scale_rule,
)


def _row_vec(x: torch.Tensor, n: int) -> int:
    """Epilogue promise for a [b, M, N] tensor: 0 if columns are strided, else the widest vector (a power of two, at
    most 16 bytes) dividing its row and batch strides and its base address, in elements (1: contiguous columns)."""
    if x.stride(2) != 1 and n > 1:
        return 0
    full = 16 // x.element_size()
    rows = x.stride(1) if x.shape[1] > 1 else 0
    batches = x.stride(0) if x.shape[0] > 1 else 0
    bits = full | rows | batches | (x.data_ptr() // x.element_size())
    return bits & -bits  # the lowest set bit: the largest power of two dividing all of them


def _epilogue_vecs(out3: torch.Tensor, c3: torch.Tensor | None, n: int) -> tuple[int, int, int]:
    """(OUT_VEC, C_VEC, N_VEC): the epilogue's promises on the output's and C's rows, and the vector dividing N that
    its column mask may assume.  A row promise is never wider than the mask's (N_VEC): beside a per-element mask,
    16-byte rows made Triton store two-byte scalars eight elements apart, 1.1-2.9x slower (median 1.4x) than with
    contiguous columns promised alone (H100, output rows padded to 16 bytes, N not a multiple of 8; experiments'
    store_width.py).  An even N that is not a multiple of 8 stores 4- or 8-byte vectors (experiments'
    ``out_vec.py --wide``: 1.018x over the 44 random-dev shapes with such an N, dev033 1437x2222x18 1.07x)."""
    out_vec = _row_vec(out3, n)
    c_vec = _row_vec(c3, n) if c3 is not None else 0
    n_vec = min(out_vec, n & -n) if out_vec > 0 else 1
    # (0, columns strided, stays 0; a narrower promise is implied by a wider one: all are powers of two)
    return min(out_vec, n_vec), min(c_vec, n_vec), n_vec


@dataclass
class GemmPlan:
    """A validated launch: ``run()`` performs the copies and kernels and returns ``out``."""

    out: torch.Tensor
    problem: Problem
    config: GemmConfig
    steps: list[Callable[[], None]] = field(default_factory=list)
    # the fp8 scales' rule (``operands.scale_rule``): the launch cache re-applies it to each call's scales
    scale_rule: ScaleRule | None = None

    def run(self) -> torch.Tensor:
        for step in self.steps:
            step()
        return self.out


def plan_gemm(
    a: torch.Tensor,
    b: torch.Tensor,
    config: GemmConfig,
    *,
    out: torch.Tensor | None = None,
    alpha: float = 1.0,
    beta: float = 0.0,
    c: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    out_dtype: str | torch.dtype | None = None,
    num_sms: int | None = None,
    a_scale: Any = None,
    b_scale: Any = None,
    precision: str | None = None,
) -> GemmPlan:
    """Validate everything and prepare the launches of ``gemm`` (the benchmark times ``plan.run``)."""
    if not isinstance(config, GemmConfig):
        raise ConfigError(f"config must be a GemmConfig, got {type(config).__name__}")
    problem = problem_of(a, b, out_dtype, precision)
    device = a.device
    if device.type != "cuda" and not interpreting():
        raise ConfigError(f"inputs are on {device}: the kernels need a CUDA device (or TRITON_INTERPRET=1)")
    if not isinstance(alpha, (int, float)) or not isinstance(beta, (int, float)):
        raise ConfigError("alpha and beta must be Python numbers")
    batch, m, n, k = problem.batch, problem.m, problem.n, problem.k
    three_d = a.dim() == 3 or b.dim() == 3
    out_torch = _NAME_TO_TORCH[problem.output_dtype]
    out_shape = (batch, m, n) if three_d else (m, n)
    if out is None:
        out = torch.empty(out_shape, dtype=out_torch, device=device)
    else:
        out = _is_tensor(out, "out")
        if tuple(out.shape) != out_shape:
            raise ConfigError(f"out has shape {tuple(out.shape)}, expected {out_shape}")
        if out.device != device:
            raise ConfigError(f"out is on {out.device}, the inputs on {device}")
        if out_dtype is not None and out.dtype != out_torch:
            raise ConfigError(f"out has dtype {out.dtype} but out_dtype asks for {out_torch}")
        if out.dtype not in _OUT_ALIASES:
            raise ConfigError(f"unsupported output dtype {out.dtype}; expected float16, bfloat16 or float32")
    out3 = out if out.dim() == 3 else out.unsqueeze(0)
    c3 = None
    if c is not None and beta != 0:
        c = _is_tensor(c, "c")
        if c.device != device:
            raise ConfigError(f"c is on {c.device}, the inputs on {device}")
        try:
            c3 = c.expand(out_shape)
        except RuntimeError:
            raise ConfigError(f"c of shape {tuple(c.shape)} does not broadcast to the output {out_shape}") from None
        c3 = c3 if c3.dim() == 3 else c3.unsqueeze(0)
    elif c is not None:
        _is_tensor(c, "c")
    bias_mode = 0
    bias_in = bias
    if bias is not None:
        bias = _is_tensor(bias, "bias")
        if bias.device != device:
            raise ConfigError(f"bias is on {bias.device}, the inputs on {device}")
        shape = tuple(bias.shape)
        if shape in ((n,), (1, n)):
            bias_mode = 1
        elif shape in ((m,), (m, 1)):
            bias_mode = 2
        else:
            raise ConfigError(f"bias must have shape ({n},) per column or ({m}, 1) per row, got {shape}")
        bias = bias.reshape(-1)
        if bias.stride(0) != 1:
            bias = bias.contiguous()
    rule, scale_number, scale_form = scale_rule(a_scale, b_scale, device, m, n, batch)
    if (a_scale is not None or b_scale is not None) and not problem.dtype.startswith("fp8"):
        raise ConfigError(f"scale_a/scale_b apply to fp8 inputs only, not {problem.dtype}")
    scale, scale2 = rule(a_scale, b_scale) if rule is not None else (None, None)
    limits = device_limits(device)
    reason = legality(config, problem, limits)
    if reason is not None:
        raise ConfigError(f"config {config.key} cannot run {m}x{n}x{k} {problem.dtype} {problem.layout}: {reason}")
    if num_sms is not None and (not isinstance(num_sms, int) or num_sms < 1):
        raise ConfigError(f"num_sms must be a positive int, got {num_sms!r}")

    plan = GemmPlan(out, problem, config, scale_rule=rule)
    if batch == 0 or m == 0 or n == 0:
        return plan
    if k == 0:

        def fill() -> None:
            result = torch.zeros(out_shape, dtype=torch.float32, device=device)
            if c3 is not None:
                result = result + beta * c3.reshape(result.shape if three_d else (m, n)).to(torch.float32)
            if bias is not None:
                result = result + (bias.to(torch.float32) if bias_mode == 1 else bias.to(torch.float32)[:, None])
            out.copy_(result)

        plan.steps.append(fill)
        return plan

    vec = vector_elements(problem.dtype)
    a_op = _operand(a, batch, True, vec)
    b_op = _operand(b, batch, False, vec)
    # which gemm() argument an operand still is (0 a, 1 b), or -1 when _operand made a contiguous copy
    a_src = 0 if a_op.tensor.data_ptr() == a.data_ptr() else -1
    b_src = 1 if b_op.tensor.data_ptr() == b.data_ptr() else -1
    copy_a, copy_b = needs_aligned_copy(problem)
    # a strided view's rows can be longer than its extent: int32 offsets of an element-wise read must still fit
    copy_a = copy_a or (not a_op.aligned and a_op.ld >= SCALAR_OFFSET_MAX_ROW)
    copy_b = copy_b or (not b_op.aligned and b_op.ld >= SCALAR_OFFSET_MAX_ROW)
    if copy_a:
        a_op, step = _aligned_copy(a_op, a_src)
        plan.steps.append(step)
    if copy_b:
        b_op, step = _aligned_copy(b_op, b_src)
        plan.steps.append(step)
    lm = m if a_op.contiguous_is_k else a_op.extent
    ln = n if b_op.contiguous_is_k else b_op.extent
    ka = a_op.extent if a_op.contiguous_is_k else k
    kb = b_op.extent if b_op.contiguous_is_k else k
    size = a_op.tensor.element_size()
    a_bytes, b_bytes = issued_widths(
        size * (vec if a_op.aligned else _unaligned_vec(a_op, vec)),
        size * (vec if b_op.aligned else _unaligned_vec(b_op, vec)),
        size,
    )
    a_vec, b_vec = a_bytes // size, b_bytes // size
    ka_vec = a_vec if a_vec > 1 and a_op.contiguous_is_k and ka % a_vec == 0 else 1
    kb_vec = b_vec if b_vec > 1 and b_op.contiguous_is_k and kb % b_vec == 0 else 1
    if config.variant == "tma":
        if not (a_op.aligned and b_op.aligned):
            raise ConfigError(f"config {config.key}: tma needs 16-byte aligned operand rows")
        if batch > 1 and (a_op.batch_stride == 0 or b_op.batch_stride == 0):
            raise ConfigError(f"config {config.key}: tma cannot broadcast an operand over the batch")
        _ensure_allocator()
    if problem.dtype.startswith("fp8") and not limits.supports(problem.dtype):
        raise ConfigError(f"fp8 needs compute capability 8.9 or newer ({limits.architecture} here)")

    sms = num_sms if num_sms is not None else limits.sm_count
    tiles_m = -(-m // config.block_m)
    tiles_n = -(-n // config.tile_n)
    tiles = batch * tiles_m * tiles_n
    dummy = out
    common = dict(
        M=m, N=n, K=k, LM=lm, LN=ln, KA=ka, KB=kb, num_tiles=tiles,
        stride_ab=a_op.batch_stride, stride_a=a_op.ld, stride_bb=b_op.batch_stride, stride_b=b_op.ld,
    )  # fmt: skip
    epi = dict(
        stride_ob=out3.stride(0) if out3.shape[0] > 1 else 0,
        stride_om=out3.stride(1),
        stride_on=out3.stride(2),
        stride_cb=(c3.stride(0) if c3.shape[0] > 1 else 0) if c3 is not None else 0,
        stride_cm=c3.stride(1) if c3 is not None else 0,
        stride_cn=c3.stride(2) if c3 is not None else 0,
        alpha=float(alpha) * scale_number,  # scales given as numbers, folded in on the host
        beta=float(beta),
    )
    out_vec, c_vec, n_vec = _epilogue_vecs(out3, c3, n)
    flags = dict(
        HAS_C=c3 is not None,
        BIAS_MODE=bias_mode,
        HAS_SCALE=scale_form,
        OUT_VEC=out_vec,
        C_VEC=c_vec,
        N_VEC=n_vec,
    )
    meta = dict(
        BLOCK_M=config.block_m, BLOCK_N=config.block_n, BLOCK_K=config.block_k, GROUP_M=config.group_m,
        num_warps=config.num_warps, num_stages=config.num_stages,
    )  # fmt: skip
    operand_flags = dict(
        A_KMAJOR=a_op.row_major, B_KMAJOR=not b_op.row_major,
        A_VEC=a_vec, B_VEC=b_vec, KA_VEC=ka_vec, KB_VEC=kb_vec,
        PRECISION="ieee" if problem.dtype == "fp32" else "tf32", EDGE_MASK=edge_mask(config, m, n),
    )  # fmt: skip
    pointers = (a_op.tensor, b_op.tensor, out3, c3 if c3 is not None else dummy, bias if bias is not None else dummy,
                scale if scale is not None else dummy, scale2 if scale2 is not None else dummy)  # fmt: skip
    # Which gemm() argument each pointer is (0 a, 1 b, 2 out, 3 c, 4 bias, 5 and 6 the scales ``rule`` makes of the
    # call's scales); -1: made here, not re-bindable; None: a constant of the plan (a padded copy's buffer, which its
    # copy step refills at each call).
    psrc = (
        None if copy_a else a_src,
        None if copy_b else b_src,
        2,
        (3 if c is not None and c3.data_ptr() == c.data_ptr() else -1) if c3 is not None else 2,
        (4 if bias_in is not None and bias.data_ptr() == bias_in.data_ptr() else -1) if bias is not None else 2,
        5 if scale is not None else 2,
        6 if scale2 is not None else 2,
    )
    per_sm = programs_per_sm(config, problem.dtype, limits)
    programs = sms * per_sm
    if config.variant == "streamk":
        dp_tiles, split = streamk_partition(tiles, programs, -(-k // config.block_k))
    # a Stream-K tail with nothing to split is the persistent schedule (same grid and tile order): the persistent
    # kernel runs it, without the tail's code (the Stream-K kernel measured 3-7% slower there, H100)
    if config.variant == "persistent" or (config.variant == "streamk" and split == 1):
        from theodolite.kernels.persistent import persistent_kernel

        grid = (min(tiles, programs),)
        plan.steps.append(
            _Launch(
                persistent_kernel,
                grid,
                pointers,
                {**common, **epi, **meta, **operand_flags, **flags, "FLATTEN": config.flatten},
                psrc,
            )
        )
    elif config.variant == "tma":
        from theodolite.kernels.tma import tma_kernel

        grid = (min(tiles, programs),)
        tma_flags = {
            key: value
            for key, value in operand_flags.items()
            if key not in ("A_VEC", "B_VEC", "KA_VEC", "KB_VEC", "EDGE_MASK")
        }
        sab = a_op.batch_stride if batch > 1 else a_op.ld * max(m, k)
        sbb = b_op.batch_stride if batch > 1 else b_op.ld * max(n, k)
        sab = -(-sab // vec) * vec
        sbb = -(-sbb // vec) * vec
        tma_common = {**common, "stride_ab": sab, "stride_bb": sbb}
        kwargs = {
            **tma_common,
            **epi,
            "batch": batch,
            "BATCHED": batch > 1,
            **meta,
            **tma_flags,
            **flags,
            "FLATTEN": config.flatten,
        }
        if config.block_n1:
            kwargs["BLOCK_N1"] = config.block_n1
        # b1_ptr (the composite tile's second B part) is B again, or its own descriptor on the host
        args: tuple[Any, ...] = (*pointers, b_op.tensor)
        sources: tuple[int | _Descriptor | None, ...] = (*psrc, psrc[1])
        if host_descriptors_enabled():

            def described(
                source: Any, op: Any, k_major: bool, rows: int, stride: int, box_rows: int
            ) -> tuple[Any, Any]:
                """The host-made descriptor over an operand (the kernel's own box) and its re-binding source."""
                d = _Descriptor.of_operand(source, k_major, rows, k, op.ld, stride, batch, (box_rows, config.block_k))
                return d.make(op.tensor), (d.source if d.source in (None, -1) else d)

            a_arg, a_source = described(psrc[0], a_op, a_op.row_major, lm, sab, config.block_m)
            b_arg, b_source = described(psrc[1], b_op, not b_op.row_major, ln, sbb, config.block_n)
            # without a second part b1_ptr stays B's pointer (unused; a pointer binds cheaper than a descriptor)
            b1_arg, b1_source = (
                described(psrc[1], b_op, not b_op.row_major, ln, sbb, config.block_n1)
                if config.block_n1
                else (b_op.tensor, psrc[1])
            )
            args = (a_arg, b_arg, *pointers[2:], b1_arg)
            sources = (a_source, b_source, *psrc[2:], b1_source)
            kwargs["HOST_DESC"] = True
        plan.steps.append(_Launch(tma_kernel, grid, args, kwargs, sources))
    elif config.variant == "streamk":
        from theodolite.kernels.streamk import streamk_kernel

        units = (tiles - dp_tiles) * split
        ws = _workspace(device, units * config.block_m * config.block_n)
        locks = _locks(device, tiles - dp_tiles)
        grid = (max(1, min(programs, max(dp_tiles, units))),)
        kwargs = {**common, **epi, "dp_tiles": dp_tiles, "split": split, **meta, **operand_flags, **flags,
                  "CHUNKS": TAIL_CHUNKS, "SPIN": not interpreting()}  # fmt: skip
        plan.steps.append(_Launch(streamk_kernel, grid, (*pointers, ws, locks), kwargs, (*psrc, None, None)))
    elif config.variant == "splitk":
        from theodolite.kernels.splitk import splitk_kernel

        split = config.split_k
        spin = cooperative_reduction(config, tiles, limits.sm_count) and not interpreting()  # the interpreter: serial
        ws = _workspace(device, split * tiles * config.block_m * config.block_n)
        locks = _locks(device, tiles)
        plan.steps.append(
            _Launch(splitk_kernel, (tiles, split), (*pointers, ws, locks),
                    {**common, **epi, "SPLIT_K": split, **meta, **operand_flags, **flags,
                     "CHUNKS": TAIL_CHUNKS, "SPIN": spin}, (*psrc, None, None))
        )  # fmt: skip
    return plan


def gemm(
    a: torch.Tensor,
    b: torch.Tensor,
    config: GemmConfig,
    *,
    out: torch.Tensor | None = None,
    alpha: float = 1.0,
    beta: float = 0.0,
    c: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    out_dtype: str | torch.dtype | None = None,
    num_sms: int | None = None,
    a_scale: Any = None,
    b_scale: Any = None,
    precision: str | None = None,
) -> torch.Tensor:
    """``alpha * scale * (a @ b) + beta * c + bias`` with one explicit kernel config.

    - a ``[M, K]`` or ``[batch, M, K]``, b ``[K, N]`` or ``[batch, K, N]`` (a 2-D operand broadcasts
      over the batch); any strides with one unit-stride dimension (others are copied).
    - dtypes fp16, bf16, fp32 (tf32 math unless ``precision="ieee"``), fp8 e4m3/e5m2 with
      ``a_scale``/``b_scale`` per tensor (float or one-element tensor) or rowwise (``[M, 1]`` and ``[1, N]``, 2-D
      problems); Hopper and newer.
    - output dtype: ``out_dtype`` or ``out.dtype``; default the input dtype (fp32 for fp32 and fp8).
    - ``c`` broadcasts to the output (read only when beta != 0); ``bias`` of shape ``(N,)`` or
      ``(1, N)`` is per column (like ``nn.Linear``), ``(M,)`` or ``(M, 1)`` per row; a 1-D bias
      with M == N is per column.
    - ``num_sms``: programs of persistent variants are ``num_sms * programs_per_sm``; default the device's.
    - Misaligned operands are copied to padded buffers exactly when ``config.needs_aligned_copy`` says so.
    """
    key = _fast_key(a, b, config, out, alpha, beta, c, bias, out_dtype, num_sms, a_scale, b_scale, precision)
    if key is not None:
        entry = _FAST.get(key)
        if entry is not None:
            return entry.run(a, b, out, c, bias, a_scale, b_scale)
    plan = plan_gemm(
        a, b, config, out=out, alpha=alpha, beta=beta, c=c, bias=bias, out_dtype=out_dtype,
        num_sms=num_sms, a_scale=a_scale, b_scale=b_scale, precision=precision,
    )  # fmt: skip
    result = plan.run()
    if key is not None and fast_launch_enabled():
        entry = _FastGemm.of(plan, out is None)
        if entry is not None:
            if len(_FAST) >= _FAST_MAX:
                _FAST.clear()
            _FAST[key] = entry
    return result


def cached_runner(
    a: torch.Tensor,
    b: torch.Tensor,
    config: GemmConfig,
    *,
    alpha: float = 1.0,
    beta: float = 0.0,
    bias: torch.Tensor | None = None,
    out_dtype: str | torch.dtype | None = None,
    num_sms: int | None = None,
    a_scale: Any = None,
    b_scale: Any = None,
    precision: str | None = None,
) -> Callable[..., torch.Tensor] | None:
    """The launch cache's entry for a gemm() call (no ``out``, no ``c``) that has run once with these arguments'
    metadata, as ``run(a, b, out, c, bias, a_scale, b_scale)``; None where that call is not cached (interpreter,
    fast launch off, copied operands).  A caller holding it (``theodolite.ops``, ``theodolite.matmul``) skips
    building and looking up gemm()'s key at each call."""
    key = _fast_key(a, b, config, None, alpha, beta, None, bias, out_dtype, num_sms, a_scale, b_scale, precision)
    entry = _FAST.get(key) if key is not None else None
    return None if entry is None else entry.run


def reads_b_by_address(run: Callable[..., torch.Tensor]) -> bool:
    """Whether a ``cached_runner`` reads b by its address alone (no aligned copy of b; b's shape and strides are the
    plan's constants): it then runs on any tensor at b's address of the same data, such as nn.Linear's weight ``W``
    in place of the view ``W.t()`` (the view costs ~1.7 us a call on the one-GPU H200 host)."""
    entry = getattr(run, "__self__", None)
    return isinstance(entry, _FastGemm) and all(copy.source != 1 for copy in entry.copies)


__all__ = [
    "GemmPlan", "KernelLaunchError", "device_limits", "gemm", "interpreting", "is_launch_failure", "plan_gemm",
    "problem_of", "reads_b_by_address", "DTYPE_BYTES",
]  # fmt: skip
