"""Tiles that are not powers of two: BLOCK_N = BN0 + BN1 as two dots on one A tile; do they win where cuBLAS uses them?

cuBLAS runs 128x160, 64x96, 96x128, 128x80, 192x128 and 320x128 tiles on the aligned shapes where our best config reads
under 0.9x of torch.matmul (``cublas_kernels.py``): tiles sized so that the output is one full wave of the 132 SMs.
Triton's blocks are powers of two, but one program may hold two accumulators, BM x BN0 and BM x BN1, fed by the same A
tile and two B tiles (both loaded by tensor descriptors, TMA), so its output tile is BM x (BN0 + BN1).  A tile that is
composite along M runs as the transposed problem (C^T = B^T A^T, the operands' strides swapped), where it is composite
along N.  Persistent, grouped tile order, plain product (alpha 1, no C, no bias).

For aligned llm and random-dev shapes under 0.9x of torch.matmul on the H100 sweep, every composite tile whose output
fills its last wave to at least 75%, at a shallow and a deep pipeline, plus the same kernel with power-of-two tiles (is
the kernel itself as fast as ours?), beside the sweep's three fastest configs and torch.matmul, as ``validate`` times a
shape.  Run on a GPU from the repository root (writes ``$OUT/composite-tiles-<gpu>.json``)::

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/composite_tiles.py [--host] [--only NAME,...]
        [--stages S,...]

``--host``: descriptors made on the host (as ``kernels/tma.py`` ships them; ``-host`` added to the file's name);
``--only``: those shapes of ``SHAPES`` (names or MxNxK); ``--stages``: those pipeline depths where they fit.

Since 2026-11-27 the TMA kernel runs composite tiles itself (``GemmConfig.block_n1``): ``--space SUITE``
times the space's composite configs (``SPACE``) on every shape of a suite beside the sweep's three fastest and
torch.matmul (``$OUT/composite-space-<suite>-<gpu>.json``); ``--merge TIMES RESULTS`` (no GPU) adds those times to a
committed results file (``harness.merge_times``).
"""

import math
import sys
from types import SimpleNamespace
from typing import Any

import triton
import triton.language as tl
from harness import gpu_name
from theodolite.kernels.epilogue import tile_coords

SMS = 132  # both our GPUs; the script reads the device's count and stops if it differs
SHAPES = {
    "llm": ("512x10240x8192", "512x6144x4096", "512x4096x4096", "128x4096x4096", "128x8192x3584", "128x7168x8192",
            "512x4096x14336", "128x6144x4096", "128x10240x8192", "128x8192x8192", "512x28672x4096", "64x4096x4096"),
    "random-dev": ("dev124", "dev072", "dev100", "dev104", "dev052", "dev044", "dev132", "dev096", "dev004", "dev012",
                   "dev192", "dev048"),
}  # fmt: skip
# (BM, BN0, BN1, warps): BN1 = 0 is a power-of-two tile (the kernel's control)
COMPOSITE = ((128, 128, 32, 8), (128, 128, 64, 8), (128, 256, 64, 8), (64, 64, 32, 4), (128, 64, 32, 8),
             (64, 128, 64, 4), (128, 64, 16, 8), (64, 128, 32, 4), (64, 64, 16, 4))  # fmt: skip
CONTROL = ((128, 256, 0, 8), (128, 128, 0, 8), (64, 128, 0, 4))
BK = 64
GROUP_M = 8
SMEM_BUDGET = 200 * 1024  # bytes of pipeline stages a config may take (the H100's 227 KB less the epilogue's scratch)
MIN_FILL = 0.75
MIN_USED = 0.85


@triton.jit
def _store(acc, c_ptr, off_m, off_n, M, N, ldc, BM: tl.constexpr, BN: tl.constexpr, TRANS_OUT: tl.constexpr):
    """The tile into C (row pitch ``ldc``) or, for the transposed problem, into C^T's storage: contiguous columns
    (rows), sizes and pitch multiples of 8 (the host checks), so the stores are 16-byte vectors."""
    rows = off_m + tl.arange(0, BM)
    cols = off_n + tl.arange(0, BN)
    mask = (rows[:, None] < (M // 8) * 8) & (cols[None, :] < (N // 8) * 8)
    ldc = (ldc // 8) * 8
    if TRANS_OUT:
        ptrs = c_ptr + cols.to(tl.int64)[None, :] * ldc + rows[:, None]
    else:
        ptrs = c_ptr + rows.to(tl.int64)[:, None] * ldc + cols[None, :]
    tl.store(ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask)


@triton.jit(do_not_specialize=["M", "N", "K", "stride_a", "stride_b", "ldc", "num_tiles"])
def composite_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K, stride_a, stride_b, ldc, num_tiles, b1_ptr,
    BM: tl.constexpr, BN0: tl.constexpr, BN1: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
    A_KMAJOR: tl.constexpr, B_KMAJOR: tl.constexpr, TRANS_OUT: tl.constexpr, HOST_DESC: tl.constexpr = False,
):  # fmt: skip
    """C[M, N] = A[M, K] B[K, N] in output tiles of BM x (BN0 + BN1), persistent, grouped order, TMA loads.
    ``HOST_DESC`` (``host_desc.py``; ``--host``): ``a_ptr``, ``b_ptr`` and ``b1_ptr`` are descriptors made on the host
    (``b1_ptr``: the BN1-wide part's; unused without HOST_DESC)."""
    if HOST_DESC:
        a_desc = a_ptr
        b0_desc = b_ptr
        b1_desc = b1_ptr
    elif A_KMAJOR:  # A stored [M, K]
        a_desc = tl.make_tensor_descriptor(a_ptr, [M, K], [stride_a, 1], [BM, BK])
    else:  # A stored [K, M]
        a_desc = tl.make_tensor_descriptor(a_ptr, [K, M], [stride_a, 1], [BK, BM])
    if HOST_DESC:
        pass
    elif B_KMAJOR:  # B stored [N, K]
        b0_desc = tl.make_tensor_descriptor(b_ptr, [N, K], [stride_b, 1], [BN0, BK])
        if BN1 > 0:
            b1_desc = tl.make_tensor_descriptor(b_ptr, [N, K], [stride_b, 1], [BN1, BK])
    else:  # B stored [K, N]
        b0_desc = tl.make_tensor_descriptor(b_ptr, [K, N], [stride_b, 1], [BK, BN0])
        if BN1 > 0:
            b1_desc = tl.make_tensor_descriptor(b_ptr, [K, N], [stride_b, 1], [BK, BN1])
    BN: tl.constexpr = BN0 + BN1
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    k_tiles = tl.cdiv(K, BK)
    for tile in tl.range(pid, num_tiles, programs):
        _, pid_m, pid_n = tile_coords(tile, num_pid_m, num_pid_n, GROUP_M)  # one batch: index 0
        off_m = pid_m * BM
        off_n = pid_n * BN
        acc0 = tl.zeros((BM, BN0), dtype=tl.float32)
        if BN1 > 0:
            acc1 = tl.zeros((BM, BN1), dtype=tl.float32)
        for kk in range(k_tiles):
            off_k = kk * BK
            if A_KMAJOR:
                a = a_desc.load([off_m, off_k])
            else:
                a = a_desc.load([off_k, off_m]).T
            if B_KMAJOR:
                b0 = b0_desc.load([off_n, off_k]).T
            else:
                b0 = b0_desc.load([off_k, off_n])
            acc0 = tl.dot(a, b0, acc0)
            if BN1 > 0:
                if B_KMAJOR:
                    b1 = b1_desc.load([off_n + BN0, off_k]).T
                else:
                    b1 = b1_desc.load([off_k, off_n + BN0])
                acc1 = tl.dot(a, b1, acc1)
        _store(acc0, c_ptr, off_m, off_n, M, N, ldc, BM, BN0, TRANS_OUT)
        if BN1 > 0:
            _store(acc1, c_ptr, off_m, off_n + BN0, M, N, ldc, BM, BN1, TRANS_OUT)


def key_of(bm: int, bn0: int, bn1: int, warps: int, stages: int, transposed: bool) -> str:
    """A candidate's name: 'cmp/BMxBN0+BN1/wW/sS' (power-of-two 'cmp/BMxBN0/...'); '/T': the transposed problem."""
    tile = f"{bm}x{bn0}+{bn1}" if bn1 else f"{bm}x{bn0}"
    return f"cmp/{tile}/w{warps}/s{stages}" + ("/T" if transposed else "")


def parse(key: str) -> tuple[int, int, int, int, int, bool]:
    _, tile, w, s, *rest = key.split("/")
    bm, bn = tile.split("x")
    bn0, _, bn1 = bn.partition("+")
    return int(bm), int(bn0), int(bn1 or 0), int(w[1:]), int(s[1:]), rest == ["T"]


def fill(m: int, n: int, bm: int, bn: int) -> float:
    """The share of the SMs' tile slots that the output's tiles use, over all waves (one program per SM)."""
    tiles = -(-m // bm) * -(-n // bn)
    return tiles / (math.ceil(tiles / SMS) * SMS)


STAGES: tuple[int, ...] = ()  # --stages: these depths (where they fit) instead of depths()'s two


def depths(bm: int, bn: int) -> list[int]:
    """A shallow and a deep pipeline that fit the shared-memory budget (or ``STAGES``)."""
    stage = (bm + bn) * BK * 2
    deep = min(8, SMEM_BUDGET // stage)
    if STAGES:
        return [s for s in STAGES if s <= SMEM_BUDGET // stage]
    return sorted({min(4, deep), deep}) if deep >= 2 else []


def candidates(m: int, n: int) -> list[str]:
    """Composite tiles filling their last wave to MIN_FILL (either orientation) and the power-of-two controls."""
    out = []
    for bm, bn0, bn1, warps in COMPOSITE:
        for transposed in (False, True):
            mm, nn = (n, m) if transposed else (m, n)
            bn = bn0 + bn1
            used = mm * nn / (-(-mm // bm) * bm * -(-nn // bn) * bn)  # the tiles' area inside the output
            if fill(mm, nn, bm, bn) >= MIN_FILL and used >= MIN_USED:
                out += [key_of(bm, bn0, bn1, warps, s, transposed) for s in depths(bm, bn0 + bn1)]
    for bm, bn0, _, warps in CONTROL:
        out += [key_of(bm, bn0, 0, warps, s, False) for s in depths(bm, bn0)]
    return out


def launches(sets: list[Any], key: str, host: bool = False) -> list[Any]:
    """Each (A, B, out) set's direct launch of candidate ``key`` (row-major A, B and out); ``host``: descriptors made
    on the host (``HOST_DESC``)."""
    from theodolite.kernels.launch import _ensure_allocator, _Launch
    from triton.tools.tensor_descriptor import TensorDescriptor

    _ensure_allocator()
    bm, bn0, bn1, warps, stages, transposed = parse(key)
    runs = []
    for a, b, out in sets:
        m, k = a.shape
        n = b.shape[1]
        if m % 8 or n % 8 or k % 8 or out.stride(1) != 1 or out.stride(0) % 8:
            raise ValueError(f"{m}x{n}x{k}: this experiment's kernel needs sizes and pitches in multiples of 8")
        if transposed:  # C^T[N, M] = B^T A^T: A' = B (stored [K, N], not K-major), B' = A (stored [M, K], K-major)
            args = (b, a, out, n, m, k, b.stride(0), a.stride(0), out.stride(0))
            mm, nn, flags = n, m, {"A_KMAJOR": False, "B_KMAJOR": True, "TRANS_OUT": True}
        else:
            args = (a, b, out, m, n, k, a.stride(0), b.stride(0), out.stride(0))
            mm, nn, flags = m, n, {"A_KMAJOR": True, "B_KMAJOR": False, "TRANS_OUT": False}
        tiles = -(-mm // bm) * -(-nn // (bn0 + bn1))
        kwargs = {"BM": bm, "BN0": bn0, "BN1": bn1, "BK": BK, "GROUP_M": GROUP_M, "num_warps": warps,
                  "num_stages": stages}  # fmt: skip
        b1: Any = args[1]
        if host:  # the boxes the kernel would make: A' [BM, BK] (or [BK, BM]), B' parts [BK, BN] (or [BN, BK])
            a_, b_ = args[0], args[1]
            a_box = [bm, BK] if flags["A_KMAJOR"] else [BK, bm]
            b_boxes = [[bn, BK] if flags["B_KMAJOR"] else [BK, bn] for bn in (bn0, bn1 or bn0)]
            b1 = TensorDescriptor.from_tensor(b_, b_boxes[1])
            args = (TensorDescriptor.from_tensor(a_, a_box), TensorDescriptor.from_tensor(b_, b_boxes[0]), *args[2:])
            kwargs["HOST_DESC"] = True
        launch = _Launch(composite_kernel, (min(tiles, SMS),), (*args, tiles, b1), {**kwargs, **flags})
        runs.append(launch)
    return runs


def warm(tasks: list[tuple[int, int, int, str, bool]]) -> int:
    """Compile and run each (M, N, K, key, host descriptors) once in this process (the Triton cache then holds it);
    spills reported."""
    import torch
    from theodolite.kernels.benchmark import make_inputs

    done = 0
    for m, n, k, key, host in tasks:
        a, b = make_inputs(m, n, k, "bf16", "nn", torch.device("cuda"))
        out = torch.empty((m, n), device="cuda", dtype=torch.bfloat16)
        try:
            launch = launches([(a, b, out)], key, host)[0]
            compiled = launch.kernel[launch.grid](*launch.args, **launch.kwargs)
            print(key, "registers", compiled.n_regs, "spills", compiled.n_spills, flush=True)
            done += 1
        except Exception as error:  # noqa: BLE001 - a config that does not compile or fit: report, skip
            print(key, m, n, k, "failed:", type(error).__name__, str(error)[:160], flush=True)
    torch.cuda.synchronize()
    return done


def space_keys() -> list[str]:
    """The composite configs of the kernels' bf16 space."""
    from theodolite.kernels.config import config_space

    return [c.key for c in config_space("bf16", ("tma",)) if c.block_n1]


def main() -> None:
    import torch
    from harness import merge_times, sweep_shapes, time_candidates

    if sys.argv[1:2] == ["--merge"]:
        added, closest = merge_times(sys.argv[2], sys.argv[3], space_keys(), "composite_tiles.py")
        print(f"{sys.argv[3]}: {added} config times added (closest to a sweep best: {closest:.3f})")
        return
    if sys.argv[1:2] == ["--space"]:
        suite = sys.argv[2]
        todo = sweep_shapes(gpu_name(), (suite,), lambda s: space_keys())
        name, script = f"composite-space-{suite}-{gpu_name()}", f"composite_tiles.py --space {suite}"
        path = time_candidates(todo, "composite", name, script)
        print("wrote", path, file=sys.stderr)
        return
    from harness import add_runs, fastest, first_right, in_workers, time_as_validate, validate_inputs, write_rows
    from theodolite.kernels.benchmark import Timer
    from theodolite.results import load_results

    global STAGES
    if torch.cuda.get_device_properties(0).multi_processor_count != SMS:
        sys.exit(f"this script's candidates assume {SMS} SMs")
    args = sys.argv[1:]
    host = "--host" in args
    only = args[args.index("--only") + 1].split(",") if "--only" in args else None
    if "--stages" in args:
        STAGES = tuple(int(x) for x in args[args.index("--stages") + 1].split(","))
    gpu = gpu_name()
    todo = []
    for suite, listed in SHAPES.items():
        wanted = [w for w in listed if only is None or w in only]
        for s in load_results(f"reports/results/validate-{suite}-{gpu}.json").shapes:
            label = f"{s.M}x{s.N}x{s.K}"
            if (s.name in wanted or label in wanted) and s.batch == 1:
                todo.append((f"{suite}:{s.name}", s.M, s.N, s.K, fastest(s.configs, 3), candidates(s.M, s.N)))
    tasks = sorted({(m, n, k, key, host) for _, m, n, k, _, extra in todo for key in extra})
    print("warmed", sum(in_workers(warm, tasks, workers=12)), "of", len(tasks), "shapes", len(todo), flush=True)
    timer = Timer()
    rows = []
    for name, m, n, k, best, extra in todo:
        inputs, sets, calls = validate_inputs(m, n, k, timer)
        ref = inputs.ref.float()
        add_runs(calls, sets, best, ref)
        for key in extra:
            try:
                runs = launches(sets, key, host)
                if first_right([SimpleNamespace(run=runs[0])], sets[0][2], ref, name, key):
                    calls[key] = runs
            except Exception as error:  # noqa: BLE001 - as in warm
                print(name, key, "failed:", type(error).__name__, str(error)[:160], flush=True)
        torch.cuda.synchronize()
        times = time_as_validate(timer, inputs, calls)
        for c, t in times.items():
            rows.append({"shape": name, "M": m, "N": n, "K": k, "config": c, "us": t * 1e3, "sweep": c in best})
        torch_us = times["torch"] * 1e3
        old = min(times[c] for c in best if c in times) * 1e3
        comp = [(t * 1e3, c) for c, t in times.items() if c.startswith("cmp/") and "+" in c]
        ctrl = [(t * 1e3, c) for c, t in times.items() if c.startswith("cmp/") and "+" not in c]
        new, top = min(comp, default=(math.inf, "-"))
        cbest, ctop = min(ctrl, default=(math.inf, "-"))
        print(f"{name} {m}x{n}x{k}: torch {torch_us:.1f} us | sweep best {old:.1f} x{torch_us / old:.3f} | "
              f"composite {new:.1f} x{torch_us / new:.3f} {top} | pow2 same kernel {cbest:.1f} {ctop}",
              flush=True)  # fmt: skip
    command = " ".join(["PYTHONPATH=$PWD OUT=$OUT python3 experiments/composite_tiles.py", *args])
    name = f"composite-tiles-{gpu}" + ("-host" if host else "")
    print("wrote", write_rows(name, command, rows), file=sys.stderr)


if __name__ == "__main__":
    main()
