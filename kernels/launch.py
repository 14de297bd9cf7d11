"""``gemm()`` and ``problem_of()``: validate tensors, derive the Problem, plan and launch one config.

Everything a user can get wrong is checked here, before any launch, and raised as a
``ConfigError`` (a ``TheodoliteError``) naming the problem.

fp32 inputs: tensor-core tf32 by default (Problem dtype ``"tf32"``); pass ``precision="ieee"``
for full fp32 math (Problem dtype ``"fp32"``, no tensor cores).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import triton
from theodolite.kernels.config import (
    COPY_PITCH_BYTES,
    DTYPE_BYTES,
    SCALAR_OFFSET_MAX_ROW,
    TAIL_CHUNKS,
    ConfigError,
    GemmConfig,
    KernelLimits,
    Problem,
    cooperative_reduction,
    issued_widths,
    legality,
    masked_edges,
    needs_aligned_copy,
    partial_vectors_enabled,
    programs_per_sm,
    streamk_partition,
    vector_elements,
)
from theodolite.kernels.padded_copy import copy_arguments, padded_copy_kernel
from triton.runtime.errors import TritonError

_TORCH_TO_NAME: dict[torch.dtype, str] = {
    torch.float16: "fp16",
    torch.bfloat16: "bf16",
    torch.float32: "tf32",
    torch.float8_e4m3fn: "fp8e4m3",
    torch.float8_e5m2: "fp8e5m2",
}
_NAME_TO_TORCH: dict[str, torch.dtype] = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}
_OUT_ALIASES: dict[Any, str] = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32"}


class KernelLaunchError(ConfigError):
    """A legal config's kernel failed to compile or launch here (more shared memory or registers than the build
    recorded, a compiler error): ``theodolite.matmul`` then runs the model's next legal config."""


def is_launch_failure(error: BaseException) -> bool:
    """Whether ``error`` is a kernel's failure to compile or launch (not a bad input)."""
    return isinstance(error, (KernelLaunchError, TritonError))


def interpreting() -> bool:
    """Whether Triton runs kernels in its CPU interpreter (tests without a GPU)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


@functools.lru_cache(maxsize=16)
def device_limits(device: torch.device) -> KernelLimits:
    """KernelLimits of a device from torch's device properties (the interpreter gets permissive ones)."""
    if device.type != "cuda":
        return KernelLimits("sm_90", 227 * 1024, 65536, 255, 1024, 32, 16, 228 * 1024, 2048)
    props = torch.cuda.get_device_properties(device)
    major, minor = props.major, props.minor
    smem_block = int(getattr(props, "shared_memory_per_block_optin", 0) or 48 * 1024)
    return KernelLimits(
        architecture=f"sm_{major}{minor}",
        smem_bytes_per_block=smem_block,
        regs_per_sm=int(getattr(props, "regs_per_multiprocessor", 65536) or 65536),
        regs_per_thread_max=255,
        max_threads_per_block=1024,
        warp_size=int(getattr(props, "warp_size", 32) or 32),
        sm_count=int(props.multi_processor_count),
        smem_bytes_per_sm=int(getattr(props, "shared_memory_per_multiprocessor", 0) or smem_block),
        max_threads_per_sm=int(getattr(props, "max_threads_per_multi_processor", 2048) or 2048),
    )


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


def _unaligned_vec(op: _Operand, vec: int) -> int:
    """A_VEC/B_VEC of an operand whose rows are not 16-byte aligned (and not copied): the largest power of
    two below ``vec`` dividing its base (in elements), row and batch strides and contiguous extent, so its
    loads stay 4- or 8-byte copies Triton's pipeliner makes asynchronous (``cp.async`` moves 4, 8 or 16
    bytes: narrower element-wise loads stay synchronous and each K step waits a memory latency)."""
    if not partial_vectors_enabled():
        return 1
    bits = op.tensor.data_ptr() // op.tensor.element_size() | op.ld | op.batch_stride | op.extent
    return min(vec // 2, bits & -bits)  # the lowest set bit: the largest power of two dividing all four


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


def _scale_tensor(a_scale: Any, b_scale: Any, device: torch.device) -> torch.Tensor | None:
    """One fp32 element on the device, the product of the per-tensor scales, that the epilogue loads (never read on
    the host: no synchronization, so CUDA graphs can capture the call); None without scales."""
    if a_scale is None and b_scale is None:
        return None
    tensors: list[torch.Tensor] = []
    number = 1.0
    for name, value in (("scale_a", a_scale), ("scale_b", b_scale)):
        if value is None:
            continue
        if isinstance(value, torch.Tensor):
            if value.numel() != 1:
                raise ConfigError(f"{name} must be a per-tensor scale (one element), got shape {tuple(value.shape)}")
            if not value.is_floating_point():
                raise ConfigError(
                    f"{name} must be a floating-point tensor (float32, as torch._scaled_mm), got {value.dtype}"
                )
            if value.device != device:
                raise ConfigError(f"{name} is on {value.device}, the inputs on {device}")
            tensors.append(value.reshape(1))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            number *= float(value)
        else:
            raise ConfigError(f"{name} must be a float or a one-element tensor, got {type(value).__name__}")
    if not tensors:
        return torch.full((1,), number, dtype=torch.float32, device=device)
    scale = tensors[0] if tensors[0].dtype == torch.float32 else tensors[0].to(torch.float32)
    for other in tensors[1:]:
        scale = scale * other  # one small launch (type promotion keeps fp32)
    return scale * number if number != 1.0 else scale


def fast_launch_enabled() -> bool:
    """Repeat launches call the compiled kernel directly (default; ``THEODOLITE_FAST_LAUNCH=0`` before the
    first gemm() call turns it off: Triton's binder at every launch, no gemm() launch cache)."""
    return os.environ.get("THEODOLITE_FAST_LAUNCH", "1") not in ("", "0") and not interpreting()


def _hooks_idle() -> bool:
    """No Triton launch hooks installed (profilers add some): only then may we skip Triton's runner."""
    from triton import knobs

    runtime = knobs.runtime
    for hook in (runtime.launch_enter_hook, runtime.launch_exit_hook):
        if hook is not None and getattr(hook, "calls", True):
            return False
    return True


def _direct_launcher(compiled: Any, grid: tuple[int, ...]) -> Callable[..., None]:
    """A callable ``f(*kernel_args)`` that launches ``compiled`` on ``grid`` with the least Python in between.

    Calls the driver's C launch entry point directly when the kernel needs no scratch buffers
    (else the CudaLauncher, which allocates them); the stream is read at each call, like Triton does.
    """
    from triton.runtime import driver

    active = driver.active
    get_device = active.get_current_device
    get_stream = active.get_current_stream
    launcher = compiled.run
    function = compiled.function
    packed = compiled.packed_metadata
    g0, g1, g2 = (tuple(grid) + (1, 1))[:3]
    if not _hooks_idle():
        runner = compiled[grid]
        return lambda *args: runner(*args)
    raw = _encoded_descriptors(getattr(launcher, "launch", None))
    scratch_size = getattr(launcher, "global_scratch_size", None)
    if (
        raw is not None
        and scratch_size is not None
        and not getattr(launcher, "profile_scratch_size", 1)
        and hasattr(launcher, "launch_cooperative_grid")
    ):
        coop, pdl = launcher.launch_cooperative_grid, launcher.launch_pdl
        scratch = None
        if scratch_size > 0:
            # Device-side TMA descriptors: global scratch, allocated once per launch shape instead of at
            # every launch (launches on one stream run in order, so they can share it, like the workspace).
            from triton.runtime import _allocation

            size = g0 * g1 * g2 * getattr(launcher, "num_ctas", 1) * scratch_size
            allocator = _allocation._allocator.get()
            scratch = allocator(size, launcher.global_scratch_align, get_stream(get_device()))

        def launch_raw(*args: Any) -> None:
            raw(
                g0, g1, g2, get_stream(get_device()), function, coop, pdl, scratch, None, packed, None, None, None,
                *args,
            )  # fmt: skip

        return launch_raw

    def launch(*args: Any) -> None:
        launcher(g0, g1, g2, get_stream(get_device()), function, packed, None, None, None, *args)

    return launch


_ENCODED: dict[tuple[Any, ...], list[Any]] = {}  # (box, address, compiled descriptor layout) -> encoded tensor map
_ENCODED_MAX = 4096


def _encoded_descriptors(raw: Any) -> Any:
    """``raw`` (a CudaLauncher's ``launch``), with host-made TMA descriptors (``THEODOLITE_TMA_HOST_DESC``) encoded
    once per (box, address) instead of at every launch: Triton wraps the C launch entry in a function that encodes
    every descriptor argument (``cuTensorMapEncodeTiled``), ~4.5 us each on the H100's host.  A descriptor the
    launch cache made (``_Descriptor.bind``) carries its box's key; others are encoded as Triton does.  ``raw`` as
    it is where it is not that wrapper (no descriptor arguments, or another Triton's layout)."""
    code, cells = getattr(raw, "__code__", None), getattr(raw, "__closure__", None)
    if code is None or not cells:
        return raw
    free = dict(zip(code.co_freevars, (cell.cell_contents for cell in cells), strict=False))
    if not {"launcher", "tensordesc_indices", "tensordesc_meta"} <= free.keys():
        return raw
    try:
        from triton.backends.nvidia.driver import _BASE_ARGS_FORMAT_LEN, make_tensordesc_arg
    except ImportError:  # pragma: no cover - another Triton
        return raw
    launch, metas = free["launcher"], free["tensordesc_meta"] or [None] * len(free["tensordesc_indices"])
    descs = [
        (i, meta, None if meta is None else repr(sorted(meta.items())))
        for i, meta in zip(sorted(free["tensordesc_indices"]), metas, strict=True)
    ]
    base = _BASE_ARGS_FORMAT_LEN

    def encoded(*args: Any) -> Any:
        final = list(args[:base])
        start = base
        for i, meta, meta_key in descs:
            final.extend(args[start : base + i])
            arg = args[base + i]
            box = getattr(arg, "_theodolite_box", None)
            if box is None or meta_key is None:
                final.extend(make_tensordesc_arg(arg, meta))
            else:
                key = (box, arg.base.data_ptr(), meta_key)
                found = _ENCODED.get(key)
                if found is None:
                    if len(_ENCODED) >= _ENCODED_MAX:
                        _ENCODED.clear()
                    found = _ENCODED[key] = make_tensordesc_arg(arg, meta)
                final.extend(found)
            start = base + i + 1
        final.extend(args[start:])
        return launch(*final)

    return encoded


def host_descriptors_enabled() -> bool:
    """TMA configs take their operand descriptors encoded on the host (the default; ``THEODOLITE_TMA_HOST_DESC=0``
    makes them in the kernel, read when a plan is made): 1.5 us less GPU time per launch (H100,
    experiments/host_desc.py)."""
    return os.environ.get("THEODOLITE_TMA_HOST_DESC", "1") not in ("", "0")


@functools.cache
def _tensor_descriptor_class() -> type:
    """Triton's host TensorDescriptor class, imported once."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    return TensorDescriptor


class _Descriptor:
    """A TMA operand descriptor made on the host: the box over the operand the kernel would describe itself
    (``kernels/tma.py``), re-made over each call's tensor on the fast path (``source``: the gemm() argument it
    describes, or None for a padded copy's buffer, a constant of the plan)."""

    __slots__ = ("source", "shape", "strides", "block", "box")

    def __init__(self, source: int | None, shape: list[int], strides: list[int], block: list[int]) -> None:
        self.source, self.shape, self.strides, self.block = source, shape, strides, block
        self.box = (tuple(shape), tuple(strides), tuple(block))

    @classmethod
    def of_operand(
        cls, source: int | None, k_major: bool, rows: int, k: int, ld: int, batch_stride: int, batch: int,
        box: tuple[int, int],
    ) -> _Descriptor:  # fmt: skip
        """As tma_kernel's in-kernel descriptor: [rows, K] (or [K, rows] when not K-major), a leading batch dimension
        for batched problems; ``box``: (block rows, block K)."""
        shape, block = ([rows, k], [box[0], box[1]]) if k_major else ([k, rows], [box[1], box[0]])
        if batch > 1:
            return cls(source, [batch, *shape], [batch_stride, ld, 1], [1, *block])
        return cls(source, shape, [ld, 1], block)

    def make(self, tensor: torch.Tensor) -> Any:
        from triton.tools.tensor_descriptor import TensorDescriptor

        return TensorDescriptor(tensor, self.shape, self.strides, self.block)

    def bind(self, tensor: torch.Tensor) -> Any:
        """The descriptor over a launch-cache call's operand: a TensorDescriptor without its checks (the cache's key
        holds the operand's metadata and address modulo 16 bytes, as when ``make`` checked the plan's), carrying its
        box for ``_encoded_descriptors``.  (No import here: a function-level import costs ~1 us a call.)"""
        desc: Any = object.__new__(_tensor_descriptor_class())
        desc.base, desc.shape, desc.strides, desc.block_shape, desc.padding = (
            tensor, self.shape, self.strides, self.block, "zero",
        )  # fmt: skip
        desc._theodolite_box = self.box  # type: ignore[attr-defined]
        return desc


class _Launch:
    """One kernel launch of a plan.

    The first call goes through ``JITFunction.__getitem__`` (specialization, compile or cache
    lookup) and keeps the CompiledKernel; later calls launch it directly with the positional
    arguments in signature order, skipping Triton's Python binder (tens of microseconds of CPU per
    launch on H100, which dominated tiny GEMMs).  ``sources[i]`` names which gemm() tensor
    (0 a, 1 b, 2 out, 3 c, 4 bias) positional argument i is, so a cached launch can be re-bound to
    new tensors of the same metadata (see ``_FastGemm``), or the host-made TMA descriptor over one
    (``_Descriptor``); None means a constant of the plan.
    """

    def __init__(
        self,
        kernel: Any,
        grid: tuple[int, ...],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        sources: tuple[int | _Descriptor | None, ...] = (),
    ) -> None:
        self.kernel = kernel
        self.grid = grid
        self.args = args
        self.kwargs = kwargs
        self.sources = sources
        self.runner: Callable[..., None] | None = None
        self.ordered: list[Any] = []

    def _bind(self) -> list[Any]:
        names = list(self.kernel.arg_names)
        kwargs = {key: value for key, value in self.kwargs.items() if key in names}
        bound = self.kernel.signature.bind(*self.args, **kwargs)
        bound.apply_defaults()
        return list(bound.arguments.values())

    def compile(self) -> bool:
        """Launch once through Triton and keep the direct launcher; False when there is none (interpreter)."""
        try:
            compiled = self.kernel[self.grid](*self.args, **self.kwargs)
        except TritonError as error:  # out of resources, a compiler error: say so, not Triton's trace
            raise KernelLaunchError(f"{self.kernel.__name__} with this config failed here: {error}") from None
        if compiled is None or not fast_launch_enabled() or not hasattr(compiled, "packed_metadata"):
            return False
        self.ordered = self._bind()
        self.runner = _direct_launcher(compiled, self.grid)
        return True

    def __call__(self) -> None:
        if self.runner is not None:
            self.runner(*self.ordered)
            return
        self.compile()


@dataclass
class GemmPlan:
    """A validated launch: ``run()`` performs the copies and kernels and returns ``out``."""

    out: torch.Tensor
    problem: Problem
    config: GemmConfig
    steps: list[Callable[[], None]] = field(default_factory=list)

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
    scale = _scale_tensor(a_scale, b_scale, device)
    if scale is not None and not problem.dtype.startswith("fp8"):
        raise ConfigError(f"scale_a/scale_b apply to fp8 inputs only, not {problem.dtype}")
    limits = device_limits(device)
    reason = legality(config, problem, limits)
    if reason is not None:
        raise ConfigError(f"config {config.key} cannot run {m}x{n}x{k} {problem.dtype} {problem.layout}: {reason}")
    if num_sms is not None and (not isinstance(num_sms, int) or num_sms < 1):
        raise ConfigError(f"num_sms must be a positive int, got {num_sms!r}")

    plan = GemmPlan(out, problem, config)
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
        alpha=float(alpha),
        beta=float(beta),
    )
    out_vec, c_vec, n_vec = _epilogue_vecs(out3, c3, n)
    flags = dict(
        HAS_C=c3 is not None,
        BIAS_MODE=bias_mode,
        HAS_SCALE=scale is not None,
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
        PRECISION="ieee" if problem.dtype == "fp32" else "tf32", EDGE_MASK=masked_edges(config),
    )  # fmt: skip
    pointers = (a_op.tensor, b_op.tensor, out3, c3 if c3 is not None else dummy, bias if bias is not None else dummy,
                scale if scale is not None else dummy)  # fmt: skip
    # Which gemm() argument each pointer is (0 a, 1 b, 2 out, 3 c, 4 bias); -1: made here, not re-bindable;
    # None: a constant of the plan (a padded copy's buffer, which its copy step refills at each call).
    psrc = (
        None if copy_a else a_src,
        None if copy_b else b_src,
        2,
        (3 if c is not None and c3.data_ptr() == c.data_ptr() else -1) if c3 is not None else 2,
        (4 if bias_in is not None and bias.data_ptr() == bias_in.data_ptr() else -1) if bias is not None else 2,
        -1 if scale is not None else 2,
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
      per-tensor ``a_scale``/``b_scale`` (float or one-element tensor; Hopper and newer).
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
            return entry.run(a, b, out, c, bias)
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
    bias: torch.Tensor | None = None,
    num_sms: int | None = None,
    precision: str | None = None,
) -> Callable[..., torch.Tensor] | None:
    """The launch cache's entry for a gemm() call that has run once with these arguments' metadata, as
    ``run(a, b, out, c, bias)``; None where that call is not cached (interpreter, fast launch off, copied operands).
    A caller holding it (``theodolite.ops``) skips building and looking up gemm()'s key at each call."""
    key = _fast_key(a, b, config, None, 1.0, 0.0, None, bias, None, num_sms, None, None, precision)
    entry = _FAST.get(key) if key is not None else None
    return None if entry is None else entry.run


class _FastGemm:
    """A cached gemm() for one (problem, config, argument metadata): compiled launchers, grids, constant
    arguments and workspace, re-bound to each call's tensors.  A repeated gemm() call then costs a
    dictionary lookup, the output allocation and one direct launch per kernel."""

    __slots__ = ("copies", "launches", "out_shape", "out_dtype")

    def __init__(
        self,
        copies: list[_AlignedCopy],
        launches: list[tuple[Callable[..., None], list[Any], tuple[tuple[int, int | _Descriptor], ...]]],
        out_shape: tuple[int, ...] | None,
        out_dtype: torch.dtype,
    ) -> None:
        self.copies = copies
        self.launches = launches
        self.out_shape = out_shape
        self.out_dtype = out_dtype

    @classmethod
    def of(cls, plan: GemmPlan, allocate_out: bool) -> _FastGemm | None:
        """The cached form of a plan that has run once; None when it cannot be re-bound (an operand made
        contiguous first, scales)."""
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
        return cls(copies, launches, tuple(plan.out.shape) if allocate_out else None, plan.out.dtype)

    def run(
        self,
        a: torch.Tensor,
        b: torch.Tensor,
        out: torch.Tensor | None,
        c: torch.Tensor | None,
        bias: torch.Tensor | None,
    ) -> torch.Tensor:
        if out is None:
            out = torch.empty(self.out_shape, dtype=self.out_dtype, device=a.device)  # type: ignore[arg-type]
        tensors = (a, b, out, c, bias)
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


def _fast_key(
    a: Any, b: Any, config: Any, out: Any, alpha: Any, beta: Any, c: Any, bias: Any,
    out_dtype: Any, num_sms: Any, a_scale: Any, b_scale: Any, precision: Any,
) -> tuple[Any, ...] | None:  # fmt: skip
    """The cache key of a gemm() call, or None when the call must take the full path (kept lean: it runs
    at every call)."""
    if a_scale is not None or b_scale is not None:
        return None
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


_ALLOCATOR_SET = False


def _ensure_allocator() -> None:
    """Device-side tensor descriptors need global scratch from an allocator Triton calls at launch."""
    global _ALLOCATOR_SET
    if _ALLOCATOR_SET:
        return

    def alloc(size: int, alignment: int, stream: Any) -> torch.Tensor:
        device = "cuda" if torch.cuda.is_available() else "cpu"
        return torch.empty(size, device=device, dtype=torch.int8)

    triton.set_allocator(alloc)
    _ALLOCATOR_SET = True


__all__ = [
    "GemmPlan", "KernelLaunchError", "device_limits", "gemm", "interpreting", "is_launch_failure", "plan_gemm",
    "problem_of", "DTYPE_BYTES",
]  # fmt: skip
