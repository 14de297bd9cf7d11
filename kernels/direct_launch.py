"""One kernel launch of a plan (``_Launch``): through Triton once, then straight to the compiled kernel.

The first call compiles (or finds) the kernel through ``JITFunction.__getitem__``; later calls go through
``_direct_launcher`` (the driver's C launch entry, skipping Triton's Python binder), with host-made TMA descriptors
(``_Descriptor``) encoded once per box and address (``_encoded_descriptors``).  Also here: the device's
``KernelLimits``, the switches read from the environment (interpreter, fast launch, host descriptors) and the
error a legal config's failed compile or launch raises.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

import torch
import triton
from theodolite.kernels.config import ConfigError, KernelLimits
from triton.runtime.errors import TritonError


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
    # torch.cuda.current_device() is _lazy_init() then this C call: CUDA is initialized once a kernel has compiled
    # here, and the wrapper cost ~2 us a launch on the one-GPU H200 host (bench-linear's host profile)
    get_device = getattr(torch._C, "_cuda_getDevice", None) or active.get_current_device
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
