"""Compile configs for a target without running them: registers, spills and shared memory for the profile.

``compile_builds`` uses ``triton.compile`` on an ``ASTSource`` for ``GPUTarget("cuda", 90, 32)``
(works on a CPU-only machine: Triton bundles ptxas), then runs ptxas ``-v`` on the PTX for
registers and spills.  ``precompile`` warms Triton's on-disk cache for the real launches of a
set of configs in parallel processes, so a timing sweep does not pay compiles serially.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from theodolite.kernels.config import (
    DTYPE_BYTES,
    TAIL_CHUNKS,
    GemmConfig,
    config_space,
    cooperative_capable,
    masked_edges,
)

from theodolite.profile.schema import KERNEL_LOADS, KernelBuild, default_out_bytes

_TRITON_TYPES = {
    "fp16": "*fp16",
    "bf16": "*bf16",
    "tf32": "*fp32",
    "fp32": "*fp32",
    "fp8e4m3": "*fp8e4nv",
    "fp8e5m2": "*fp8e5",
}


def _out_type(dtype: str, out_bytes: int) -> str:
    """The output pointer type of a build: 4 bytes fp32; 2 bytes the input dtype where it is fp16, else bf16."""
    if out_bytes == 4:
        return "*fp32"
    return "*fp16" if dtype == "fp16" else "*bf16"


def _source(
    config: GemmConfig,
    dtype: str,
    layout: str,
    loads: str = "vector",
    extra: dict[str, Any] | None = None,
    out_bytes: int = 0,
) -> tuple[Any, Any]:
    """The ASTSource of a config's main kernel (what dominates its registers and shared memory).

    ``loads``: the operands' load width (``KernelBuild.loads``): "vector" 16 bytes, "vec8"/"vec4" the
    binaries of misaligned rows read as 8-/4-byte vectors, "scalar" element-wise (both operands
    misaligned and not copied), "scalar-a"/"scalar-b" that operand element-wise and the other 16-byte
    vectors: each a different register budget; the narrow ones spill first.  ``out_bytes``: the output's element
    size (0: the dtype's default), which sizes the epilogue's staging in shared memory."""
    from theodolite.kernels import persistent, splitk, streamk, tma
    from triton.compiler import ASTSource

    widths = {"vector": (16, 16), "vec8": (8, 8), "vec4": (4, 4), "scalar": (1, 1), "scalar-a": (1, 16),
              "scalar-b": (16, 1)}[loads]  # fmt: skip
    a_vec, b_vec = (max(1, width // DTYPE_BYTES[dtype]) for width in widths)
    kernel = {
        "persistent": persistent.persistent_kernel,
        "streamk": streamk.streamk_kernel,
        "splitk": splitk.splitk_kernel,
        "tma": tma.tma_kernel,
    }[config.variant]
    constexprs: dict[str, Any] = {
        "BLOCK_M": config.block_m,
        "BLOCK_N": config.block_n,
        "BLOCK_K": config.block_k,
        "GROUP_M": config.group_m,
        "A_KMAJOR": layout[0] == "n",
        "B_KMAJOR": layout[1] == "t",
        "PRECISION": "ieee" if dtype == "fp32" else "tf32",
    }
    if config.variant != "tma":
        constexprs.update(
            A_VEC=a_vec,
            B_VEC=b_vec,
            KA_VEC=a_vec if layout[0] == "n" else 1,
            KB_VEC=b_vec if layout[1] == "t" else 1,
            EDGE_MASK=masked_edges(config),
        )
    else:
        from theodolite.kernels.launch import host_descriptors_enabled

        # the shipped binary: operand descriptors encoded on the host (typed parameters) unless switched off
        constexprs.update(BATCHED=False, HOST_DESC=host_descriptors_enabled(), BLOCK_N1=config.block_n1)
    if config.variant == "splitk":
        # the cooperative reduction's binary where the config can reduce cooperatively (config.cooperative_reduction:
        # the shapes it serves are one wave of programs, where that is the binary that runs)
        constexprs.update(SPLIT_K=config.split_k, CHUNKS=TAIL_CHUNKS, SPIN=cooperative_capable(config))
    if config.variant in ("persistent", "tma"):
        constexprs["FLATTEN"] = config.flatten
    if config.variant == "streamk":
        constexprs.update(CHUNKS=TAIL_CHUNKS, SPIN=True)
    out_bytes = out_bytes or default_out_bytes(dtype)
    out_vec = 16 // out_bytes
    constexprs.update(HAS_C=False, BIAS_MODE=0, HAS_SCALE=False, OUT_VEC=out_vec, C_VEC=0, N_VEC=out_vec)
    constexprs.update(extra or {})
    signature: dict[str, str] = {}
    attrs: dict[tuple[int, ...], list[list[Any]]] = {}
    declared = {p.name for p in kernel.params if p.is_constexpr}
    missing = declared - set(constexprs)
    if missing:
        raise RuntimeError(f"build signature lacks constexprs {sorted(missing)} of {kernel.__name__}")
    for index, name in enumerate(kernel.arg_names):
        if name in constexprs:
            signature[name] = "constexpr"
        elif name in ("a_ptr", "b_ptr") and constexprs.get("HOST_DESC"):
            signature[name] = _descriptor_type(config, dtype, layout, name == "a_ptr")
        elif name == "b1_ptr" and constexprs.get("HOST_DESC") and config.block_n1:
            signature[name] = _descriptor_type(config, dtype, layout, False, config.block_n1)
        elif name in ("a_ptr", "b_ptr", "b1_ptr"):
            signature[name] = _TRITON_TYPES[dtype]
        elif name in ("out_ptr", "c_ptr", "bias_ptr"):
            signature[name] = _out_type(dtype, out_bytes)
        elif name in ("scale_ptr", "scale2_ptr", "ws_ptr"):
            signature[name] = "*fp32"
        elif name == "lock_ptr":
            signature[name] = "*i32"
        elif name in ("alpha", "beta"):
            signature[name] = "fp32"
        else:
            signature[name] = "i32"
        if signature[name].startswith("*"):
            attrs[(index,)] = [["tt.divisibility", 16]]
    return kernel, ASTSource(fn=kernel, signature=signature, constexprs=constexprs, attrs=attrs)


def _descriptor_type(config: GemmConfig, dtype: str, layout: str, is_a: bool, rows_b: int = 0) -> str:
    """The signature type of a host-made operand descriptor: its element type and box (``launch._Descriptor``:
    [rows, K] boxes for K-major operands, [K, rows] otherwise); ``rows_b``: a B box other than block_n rows (a
    composite tile's second part)."""
    element = _TRITON_TYPES[dtype].lstrip("*")
    rows, k_major = (config.block_m, layout[0] == "n") if is_a else (rows_b or config.block_n, layout[1] == "t")
    box = (rows, config.block_k) if k_major else (config.block_k, rows)
    return f"tensordesc<{element}[{box[0]}, {box[1]}]>"


def _ptxas() -> str:
    import triton

    return os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "ptxas")


def _ptxas_usage(ptx: str, arch: str) -> tuple[int, int]:
    """(registers, spill bytes) from ``ptxas -v``."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "k.ptx")
        with open(path, "w") as stream:
            stream.write(ptx)
        result = subprocess.run(
            [_ptxas(), "-v", f"--gpu-name={arch}", path, "-o", os.path.join(folder, "k.cubin")],
            capture_output=True,
            text=True,
            check=False,
        )
    text = result.stdout + result.stderr
    regs = re.search(r"Used (\d+) registers", text)
    spills = [int(x) for x in re.findall(r"(\d+) bytes spill (?:stores|loads)", text)]
    if regs is None:
        raise RuntimeError(f"ptxas gave no register count: {text[-500:]}")
    return int(regs.group(1)), max(spills, default=0)


def compile_one(
    config_key: str,
    dtype: str,
    architecture: str = "sm_90",
    layout: str = "nn",
    loads: str = "vector",
    out_bytes: int = 0,
) -> KernelBuild:
    """Compile one config for ``architecture`` (no GPU needed) and read its resources."""
    import triton
    from triton.backends.compiler import GPUTarget

    config = GemmConfig.from_key(config_key)
    capability = int("".join(ch for ch in architecture[3:] if ch.isdigit()))
    target = GPUTarget("cuda", capability, 32)
    # layout "" / out_bytes 0: a layout-agnostic build (BUILD_MATRIX), compiled as nn at the default output
    _, source = _source(config, dtype, layout or "nn", loads, out_bytes=out_bytes or default_out_bytes(dtype))
    backend = triton.compiler.make_backend(target)
    options = backend.parse_options({"num_warps": config.num_warps, "num_stages": config.num_stages})
    compiled = triton.compile(source, target=target, options=options.__dict__)
    arch = f"sm_{capability}a" if capability >= 90 else f"sm_{capability}"
    regs, spills = _ptxas_usage(compiled.asm["ptx"], arch)
    return KernelBuild(
        variant=config.variant,
        config_key=config.key,
        dtype=dtype,
        architecture=architecture,
        n_regs=regs,
        n_spills=spills,
        shared_bytes=int(compiled.metadata.shared),
        num_stages=config.num_stages,
        loads=loads,
        layout=layout,
        # a build of a named layout records the output size it was compiled for (Profile.kernel_build looks it up so)
        out_bytes=out_bytes or (default_out_bytes(dtype) if layout else 0),
    )


def _compile_task(args: tuple[str, str, str, str, str, int]) -> KernelBuild | str:
    try:
        return compile_one(*args)
    except Exception as error:  # a config that does not compile is reported, not fatal
        return f"{args[0]} {args[1]} {args[3]} {args[4]} out {args[5]} B: {type(error).__name__}: {str(error)[:300]}"


# What each dtype is built for (``build_matrix``): (layouts, output element sizes); "" / 0 is a layout-agnostic
# build (compiled as nn at the default output) that serves every layout without its own build (autograd's dW = dY^T X
# is tn).  nt, the layout of nn.Linear weights (x @ W.t()), has its own: a K-major B changes the binary of misaligned
# operands most (bf16 on sm_90: 146 of 449 builds differ from nn's in residency, spills or shared memory; scalar-b
# persistent/32x64x128 spills 120 B in nt and none in nn, vec4 ones spill in nn and not in nt).  fp8 runs K-major B
# only (``matmul`` copies an N-major B), with bf16 or fp32 output: its shared memory and registers differ by both (fp8
# 128x256x128 s4: 229 KB with bf16 output, 328 KB with fp32).
BUILD_MATRIX: dict[str, tuple[tuple[str, ...], tuple[int, ...]]] = {
    "bf16": (("", "nt"), (0,)),
    "fp16": (("", "nt"), (0,)),
    "tf32": (("", "nt"), (0,)),
    "fp32": (("", "nt"), (0,)),
    "fp8e4m3": (("nt",), (2, 4)),
    "fp8e5m2": (("nt",), (2, 4)),
}
# The Triton kernels whose sources decide every build (the launcher and this harness do not).
KERNEL_SOURCES = ("persistent.py", "splitk.py", "streamk.py", "tma.py", "epilogue.py", "padded_copy.py")


def kernel_source_key() -> str:
    """What the builds of an architecture depend on besides it: the Triton version, the kernels' sources and the
    build matrix.  A profile stamped with the same key (``Provenance.kernel_source``) has builds that a new
    calibration of that architecture may reuse instead of compiling them again."""
    import hashlib
    import json
    from pathlib import Path

    import triton

    digest = hashlib.sha256(triton.__version__.encode())
    folder = Path(__file__).resolve().parent
    for name in KERNEL_SOURCES:
        digest.update((folder / name).read_bytes())
    digest.update(json.dumps(BUILD_MATRIX, sort_keys=True).encode())
    return digest.hexdigest()[:16]


def compile_builds(
    dtypes: tuple[str, ...] | list[str],
    architecture: str = "sm_90",
    configs: list[GemmConfig] | None = None,
    workers: int | None = None,
    loads: tuple[str, ...] = KERNEL_LOADS,
) -> list[KernelBuild]:
    """KernelBuild (registers, spills, shared bytes) of every config of ``dtypes`` for ``architecture``.

    One build per layout and output element size of the dtype's ``BUILD_MATRIX`` entry (which operands are K-major
    changes shared memory and registers; the output size, the epilogue's staging).  Each config is built for vector
    loads and, for the non-TMA variants, for the narrower loads of misaligned operands that are not copied
    (``KERNEL_LOADS``).  Configs that fail to compile are left out (their errors are printed): legality then refuses
    them.
    """
    tasks = []
    for dtype in dtypes:
        layouts, sizes = BUILD_MATRIX[dtype]
        chosen = configs if configs is not None else list(config_space(dtype))
        for config in chosen:
            for layout in layouts:
                for kind in loads:
                    if kind != "vector" and config.variant == "tma":
                        continue  # TMA never runs misaligned operands
                    for size in sizes:
                        tasks.append((config.key, dtype, architecture, layout, kind, size))
    workers = workers or max(1, min(len(tasks), (os.cpu_count() or 2)))
    with ProcessPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(_compile_task, tasks, chunksize=8))
    builds = []
    for result in results:
        if isinstance(result, str):
            print(f"compile failed: {result}")
            continue
        builds.append(result)
    return builds


def _warm(jobs: list[tuple[str, str, str, int, int, int]]) -> list[str]:
    """Run each (config, dtype, layout, M, N, K) once: fills Triton's disk cache for that specialization."""
    import torch
    from theodolite.kernels.benchmark import make_inputs
    from theodolite.kernels.launch import plan_gemm

    errors = []
    inputs: dict[tuple[str, str, int, int, int], tuple[torch.Tensor, torch.Tensor]] = {}
    for key, dtype, layout, m, n, k in jobs:
        try:
            if (dtype, layout, m, n, k) not in inputs:
                inputs.clear()
                inputs[(dtype, layout, m, n, k)] = make_inputs(m, n, k, dtype, layout, torch.device("cuda"), seed=0)
            a, b = inputs[(dtype, layout, m, n, k)]
            plan_gemm(a, b, GemmConfig.from_key(key), precision="ieee" if dtype == "fp32" else None).run()
        except Exception as error:
            errors.append(f"{key} {m}x{n}x{k}: {type(error).__name__}: {str(error)[:200]}")
    torch.cuda.synchronize()
    return errors


def specialization(problem: Any) -> tuple[int | bool, ...]:
    """What decides which binary a config compiles to for a contiguous problem (sizes and strides do not):
    the operands' load widths (16 bytes aligned or copied, else 8, 4 or element-wise), output rows aligned,
    N a multiple of the output vector."""
    from theodolite.kernels.config import load_widths

    a_width, b_width = load_widths(problem)
    out_vec = 16 // problem.output_bytes
    return (
        a_width,
        b_width,
        problem.n % out_vec == 0 or problem.m == 1,
        problem.n % out_vec == 0,
        problem.batch > 1,
    )


def precompile(
    jobs: list[tuple[GemmConfig, Any]],
    workers: int = 8,
) -> list[str]:
    """Compile the real launches of (config, problem) pairs in ``workers`` spawned processes.

    Sizes and strides are not specialized, so one binary per (config, ``specialization(problem)``)
    serves every shape: pass one small problem per specialization.  Returns error messages.
    """
    import multiprocessing

    tasks = [(c.key, p.dtype, p.layout, p.m, p.n, p.k) for c, p in jobs]
    tasks.sort(key=lambda t: (t[3:], t[0]))  # shapes together: inputs are reused within a chunk
    if not tasks:
        return []
    workers = max(1, min(workers, len(tasks)))
    size = -(-len(tasks) // workers)
    chunks = [tasks[i : i + size] for i in range(0, len(tasks), size)]
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=len(chunks), mp_context=context) as pool:
        results = pool.map(_warm, chunks)
        return [error for chunk in results for error in chunk]
