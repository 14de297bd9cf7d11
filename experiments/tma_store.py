"""Output tiles stored by TMA (a tensor descriptor) instead of register-to-global stores: do store-bound shapes gain?

On the H200 three large random-dev shapes with K = 128 run under 0.85x of torch.matmul where the H100 ties it: our time
is the same on both GPUs (dev184 8064x10368x128: 72.3 us H100, 74.0 us H200; its 167 MB output at ~2.3 TB/s) while
cuBLAS follows the H200's HBM (74.0 -> 57.4 us).  So the epilogue's stores, not HBM, bound these kernels.  This swaps
into the TMA variant's launch a copy of its kernel whose epilogue, for a plain product (no C, bias or scale, 2-D, rows
16-byte aligned), writes the output tile through a tensor descriptor (``desc.store``); other epilogues as shipped.  For
the K = 128 shapes and a few large llm and random-dev shapes, the sweep's three fastest TMA configs both ways, beside
torch.matmul, as ``validate`` times a shape.  Run on a GPU from the repository root (writes
``$OUT/tma-store-<gpu>.json``)::

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/tma_store.py
"""

import sys
from typing import Any

import triton
import triton.language as tl
from theodolite.kernels.epilogue import epilogue, tile_coords
from theodolite.kernels.persistent import RUNTIME_INTS
from theodolite.kernels.tma import _load_a, _load_b

SHAPES = (("random-dev", "dev184"), ("random-dev", "dev112"), ("random-dev", "dev148"), ("random-dev", "dev144"),
          ("random-dev", "dev049"), ("llm", "llama3-8b.gate_up"), ("llm", "llama3-8b.o"))  # fmt: skip
PER_SHAPE = 3


@triton.jit(do_not_specialize=RUNTIME_INTS + ["batch"])
def tma_store_kernel(
    a_ptr, b_ptr, out_ptr, c_ptr, bias_ptr, scale_ptr, scale2_ptr,
    M, N, K, LM, LN, KA, KB, num_tiles,
    stride_ab, stride_a, stride_bb, stride_b,
    stride_ob, stride_om, stride_on, stride_cb, stride_cm, stride_cn,
    alpha, beta, batch,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    A_KMAJOR: tl.constexpr, B_KMAJOR: tl.constexpr, BATCHED: tl.constexpr,
    PRECISION: tl.constexpr, HAS_C: tl.constexpr, BIAS_MODE: tl.constexpr, HAS_SCALE: tl.constexpr,
    OUT_VEC: tl.constexpr, C_VEC: tl.constexpr, N_VEC: tl.constexpr,
    FLATTEN: tl.constexpr,
):  # fmt: skip
    """``kernels.tma.tma_kernel`` (2-D only) with the plain product's output tile stored through a descriptor."""
    if A_KMAJOR:  # noqa: SIM108
        a_desc = tl.make_tensor_descriptor(a_ptr, [LM, K], [stride_a, 1], [BLOCK_M, BLOCK_K])
    else:
        a_desc = tl.make_tensor_descriptor(a_ptr, [K, LM], [stride_a, 1], [BLOCK_K, BLOCK_M])
    if B_KMAJOR:  # noqa: SIM108
        b_desc = tl.make_tensor_descriptor(b_ptr, [LN, K], [stride_b, 1], [BLOCK_N, BLOCK_K])
    else:
        b_desc = tl.make_tensor_descriptor(b_ptr, [K, LN], [stride_b, 1], [BLOCK_K, BLOCK_N])
    PLAIN: tl.constexpr = (not HAS_C) and BIAS_MODE == 0 and (not HAS_SCALE) and OUT_VEC == N_VEC and N_VEC > 1
    if PLAIN:
        out_desc = tl.make_tensor_descriptor(out_ptr, [M, N], [stride_om, 1], [BLOCK_M, BLOCK_N])
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    for tile in tl.range(pid, num_tiles, programs, flatten=FLATTEN):
        bid, pid_m, pid_n = tile_coords(tile, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for kk in range(k_tiles):
            a = _load_a(a_desc, bid, off_m, kk * BLOCK_K, BLOCK_M, BLOCK_K, A_KMAJOR, False)
            b = _load_b(b_desc, bid, off_n, kk * BLOCK_K, BLOCK_N, BLOCK_K, B_KMAJOR, False)
            acc = tl.dot(a, b, acc, input_precision=PRECISION)
        if PLAIN:
            out_desc.store([off_m, off_n], (acc * alpha).to(out_ptr.dtype.element_ty))
        else:
            epilogue(
                acc, out_ptr, c_ptr, bias_ptr, scale_ptr, scale2_ptr, bid, pid_m, pid_n, M, N,
                stride_ob, stride_om, stride_on, stride_cb, stride_cm, stride_cn, alpha, beta,
                BLOCK_M, BLOCK_N, HAS_C, BIAS_MODE, HAS_SCALE, OUT_VEC, C_VEC, N_VEC,
            )  # fmt: skip


def plans_of(sets: list[Any], key: str, store: bool) -> list[Any]:
    """Each (A, B, out) set's plan of TMA config ``key``, its kernel swapped for ``tma_store_kernel`` if ``store``."""
    from theodolite.kernels import tma
    from theodolite.kernels.config import GemmConfig
    from theodolite.kernels.launch import plan_gemm

    plans = [plan_gemm(x, y, GemmConfig.from_key(key), out=o) for x, y, o in sets]
    if store:
        for plan in plans:
            step = plan.steps[-1]
            assert step.kernel is tma.tma_kernel and not step.kwargs["BATCHED"], step.kernel
            step.kernel = tma_store_kernel
            step.args, step.sources = step.args[:7], step.sources[:7]  # its kernel has no b1_ptr (composite tiles)
    return plans


def warm_both(tasks: list[tuple[int, int, int, str, bool]]) -> int:
    """``harness.warm_plans`` where a descriptor store's staging buffer may not fit shared memory (skipped)."""
    from harness import warm_plans
    from theodolite.kernels.config import ConfigError

    done = 0
    for task in tasks:
        try:
            done += warm_plans([task], plans_of)
        except ConfigError as error:
            print(task, "does not fit:", str(error)[:120], flush=True)
    return done


def main() -> None:
    import torch
    from harness import best_by_way, first_right, gpu_name, in_workers, time_as_validate, validate_inputs, way_rows
    from harness import write_rows
    from theodolite.kernels.benchmark import Timer
    from theodolite.kernels.config import ConfigError

    from theodolite.results import load_results

    gpu = gpu_name()
    sweeps = {
        suite: load_results(f"reports/results/validate-{suite}-{gpu}.json").shapes for suite in ("llm", "random-dev")
    }
    todo = []
    for suite, name in SHAPES:
        for s in sweeps[suite]:
            if s.name == name and s.M >= 2048:
                keys = [c for c, _ in sorted(s.configs.items(), key=lambda kv: kv[1] or 9e9) if c.startswith("tma/")]
                todo.append((f"{suite}:{name}", s.M, s.N, s.K, keys[:PER_SHAPE]))
    tasks = sorted({(m, n, k, key, store) for _, m, n, k, keys in todo for key in keys for store in (False, True)})
    print("warmed", sum(in_workers(warm_both, tasks, workers=8)), "of", len(tasks), flush=True)
    timer = Timer()
    rows = []
    for name, m, n, k, keys in todo:
        inputs, sets, calls = validate_inputs(m, n, k, timer)
        ref = inputs.ref.float()
        for key in keys:
            for store in (False, True):
                plans = plans_of(sets, key, store)
                try:
                    right = first_right(plans, sets[0][2], ref, name, key, store)
                except ConfigError:  # the store's staging buffer beside the pipeline's stages: over shared memory
                    continue
                if right:
                    calls[f"{key}@{'tma-store' if store else 'stores'}"] = [p.run for p in plans]
        torch.cuda.synchronize()
        times = time_as_validate(timer, inputs, calls)
        rows += way_rows(name, m, n, k, times)
        best = best_by_way(times, ("stores", "tma-store"))
        print(f"{name} {m}x{n}x{k}: torch {times['torch'] * 1e3:.1f} us, stores {best['stores'] * 1e3:.1f} "
              f"(x{times['torch'] / best['stores']:.3f}), tma-store {best['tma-store'] * 1e3:.1f} "
              f"(x{times['torch'] / best['tma-store']:.3f})", flush=True)  # fmt: skip
    command = "PYTHONPATH=$PWD OUT=$OUT python3 experiments/tma_store.py"
    print("wrote", write_rows(f"tma-store-{gpu}", command, rows), file=sys.stderr)


if __name__ == "__main__":
    main()
