"""Balanced K-step shares on the TMA kernel: can 128x256 tiles use every SM where one wave of them leaves SMs idle?

dev124 768x3200x4224 reads 0.75x of torch.matmul with the space's best (78 tiles of 128x256 on 132 SMs, 54 idle; the
TMA split tail of ``tma_streamk.py`` reached 0.81x with 128x128 tiles, whose full wave is bound by the L2's bandwidth:
32 KB per 2.1 MFLOP K-step against 128x256's 48 KB per 4.2).  The balanced tail of 2026-11-24 (pointer loads,
only the last wave) lost everywhere.  This kernel is the TMA kernel (host descriptors) over ``dp_tiles`` data-parallel
tiles, then program p takes the global K-steps [p * steps, (p + 1) * steps) of the remaining tiles in tile-major order
(Stream-K's textbook shares when ``steps`` = ceil(steps of all / programs); a multiple of k_tiles / S keeps the pieces'
K-offsets on S slice boundaries).  A tile cut into pieces is reduced by the last piece to arrive: every piece stores its
fp32 partial and counts itself in; the last adds the pieces' partials in piece order, row chunk by row chunk
(``REG2``: where a tile has two pieces, the last adds the other's partial to its own registers, exact either way as
two-term sums commute).  No piece waits for another, so the grid may exceed one wave.

Per shape of both suites whose committed final round reads under 1.0x of torch.matmul (aligned, batch 1): every TMA
tile of the space (unflattened) at a few ``steps`` choices, as ``tmab/<tile>/<mode><steps>`` (mode ``a``: all tiles
balanced; ``t``: full waves data-parallel, the rest balanced; ``h``: all but the last full wave data-parallel;
``r``: REG2), beside the sweep's three fastest configs
and torch.matmul, timed as ``validate`` times a shape.  Run on a GPU from the repository root::

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/tma_balanced.py [--all] [--only NAME,...]

(``$OUT/tma-balanced-<gpu>.json``).  ``--check`` runs a few forced partitions against torch.matmul (the interpreter
too: ``TRITON_INTERPRET=1``).
"""

import math
import sys
from typing import Any

import triton
import triton.language as tl
from theodolite.kernels.epilogue import epilogue, tile_coords
from theodolite.kernels.persistent import RUNTIME_INTS
from theodolite.kernels.tma import _load_a, _load_b

BAR = 1.0
CHUNKS = 4  # row chunks of the reduction: a 128-row tile is summed 32 rows at a time


@triton.jit(do_not_specialize=RUNTIME_INTS + ["batch", "dp_tiles", "steps", "max_pieces"])
def tma_balanced_kernel(
    a_ptr, b_ptr, out_ptr, c_ptr, bias_ptr, scale_ptr, scale2_ptr, ws_ptr, lock_ptr,
    M, N, K, LM, LN, KA, KB, num_tiles,
    stride_ab, stride_a, stride_bb, stride_b,
    stride_ob, stride_om, stride_on, stride_cb, stride_cm, stride_cn,
    alpha, beta, batch, dp_tiles, steps, max_pieces,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    A_KMAJOR: tl.constexpr, B_KMAJOR: tl.constexpr, BATCHED: tl.constexpr,
    PRECISION: tl.constexpr, HAS_C: tl.constexpr, BIAS_MODE: tl.constexpr, HAS_SCALE: tl.constexpr,
    OUT_VEC: tl.constexpr, C_VEC: tl.constexpr, N_VEC: tl.constexpr,
    FLATTEN: tl.constexpr, HOST_DESC: tl.constexpr, CHUNKS: tl.constexpr, REG2: tl.constexpr,
):  # fmt: skip
    a_desc = a_ptr
    b_desc = b_ptr
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    for tile in tl.range(pid, dp_tiles, programs, flatten=FLATTEN):
        bid, pid_m, pid_n = tile_coords(tile, num_pid_m, num_pid_n, GROUP_M)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for kk in range(k_tiles):
            a = _load_a(a_desc, bid, pid_m * BLOCK_M, kk * BLOCK_K, BLOCK_M, BLOCK_K, A_KMAJOR, BATCHED)
            b = _load_b(b_desc, bid, pid_n * BLOCK_N, kk * BLOCK_K, BLOCK_N, BLOCK_K, B_KMAJOR, BATCHED)
            acc = tl.dot(a, b, acc, input_precision=PRECISION)
        epilogue(
            acc, out_ptr, c_ptr, bias_ptr, scale_ptr, scale2_ptr, bid, pid_m, pid_n, M, N,
            stride_ob, stride_om, stride_on, stride_cb, stride_cm, stride_cn, alpha, beta,
            BLOCK_M, BLOCK_N, HAS_C, BIAS_MODE, HAS_SCALE, OUT_VEC, C_VEC, N_VEC,
        )  # fmt: skip
    total_steps = (num_tiles - dp_tiles) * k_tiles
    it = pid * steps
    end = tl.minimum(it + steps, total_steps)
    tile_elems: tl.constexpr = BLOCK_M * BLOCK_N
    r = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    ROWS: tl.constexpr = BLOCK_M // CHUNKS
    rc = tl.arange(0, ROWS)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    while it < end:
        rel = it // k_tiles
        k0 = it - rel * k_tiles
        k1 = tl.minimum(k_tiles, k0 + (end - it))
        bid, pid_m, pid_n = tile_coords(dp_tiles + rel, num_pid_m, num_pid_n, GROUP_M)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for kk in range(k0, k1):
            a = _load_a(a_desc, bid, pid_m * BLOCK_M, kk * BLOCK_K, BLOCK_M, BLOCK_K, A_KMAJOR, BATCHED)
            b = _load_b(b_desc, bid, pid_n * BLOCK_N, kk * BLOCK_K, BLOCK_N, BLOCK_K, B_KMAJOR, BATCHED)
            acc = tl.dot(a, b, acc, input_precision=PRECISION)
        if k0 == 0 and k1 == k_tiles:
            epilogue(
                acc, out_ptr, c_ptr, bias_ptr, scale_ptr, scale2_ptr, bid, pid_m, pid_n, M, N,
                stride_ob, stride_om, stride_on, stride_cb, stride_cm, stride_cn, alpha, beta,
                BLOCK_M, BLOCK_N, HAS_C, BIAS_MODE, HAS_SCALE, OUT_VEC, C_VEC, N_VEC,
            )  # fmt: skip
        else:
            first = (rel * k_tiles) // steps
            pieces = ((rel + 1) * k_tiles - 1) // steps - first + 1
            base = ws_ptr + (rel * max_pieces).to(tl.int64) * tile_elems
            tl.store(base + (pid - first) * tile_elems + r, acc)
            tl.debug_barrier()  # every thread's share of the partial is written before the release below
            arrived = tl.atomic_add(lock_ptr + rel, 1, sem="acq_rel", scope="gpu")
            if arrived == pieces - 1:
                tl.atomic_xchg(lock_ptr + rel, 0, sem="relaxed", scope="gpu")  # all pieces are in: reset for next
                if REG2 and pieces == 2:
                    other = 1 - (pid - first)
                    acc += tl.load(base + other * tile_elems + r, cache_modifier=".cg")
                    epilogue(
                        acc, out_ptr, c_ptr, bias_ptr, scale_ptr, scale2_ptr, bid, pid_m, pid_n, M, N,
                        stride_ob, stride_om, stride_on, stride_cb, stride_cm, stride_cn, alpha, beta,
                        BLOCK_M, BLOCK_N, HAS_C, BIAS_MODE, HAS_SCALE, OUT_VEC, C_VEC, N_VEC,
                    )  # fmt: skip
                else:
                    for chunk in range(CHUNKS):
                        part = tl.zeros((ROWS, BLOCK_N), dtype=tl.float32)
                        for i in tl.range(pieces, loop_unroll_factor=1):
                            part += tl.load(base + i * tile_elems + chunk * (ROWS * BLOCK_N) + rc, cache_modifier=".cg")
                        epilogue(
                            part, out_ptr, c_ptr, bias_ptr, scale_ptr, scale2_ptr, bid, pid_m * CHUNKS + chunk, pid_n, M, N,
                            stride_ob, stride_om, stride_on, stride_cb, stride_cm, stride_cn, alpha, beta,
                            ROWS, BLOCK_N, HAS_C, BIAS_MODE, HAS_SCALE, OUT_VEC, C_VEC, N_VEC,
                        )  # fmt: skip
        it += k1 - k0


def tiles_and_steps(m: int, n: int, k: int, key: str) -> tuple[int, int]:
    """(output tiles, K-steps per tile) of config ``key`` on an M x N x K problem."""
    from theodolite.kernels.config import GemmConfig

    c = GemmConfig.from_key(key)
    return -(-m // c.block_m) * -(-n // c.block_n), -(-k // c.block_k)


def partitions(m: int, n: int, k: int, key: str, programs: int) -> list[str]:
    """The ``<mode><steps>`` choices of TMA config ``key`` on this shape: textbook shares of all tiles (``a``) and
    the same rounded up to S-slice boundaries (S dividing the K-steps) below one tile, shares of what the full waves
    leave (``t``, where there are full waves), of that and one full wave (``h``, Stream-K's hybrid, where there are
    two), and the two-piece register reduction (``r``) of the first ``a`` choice."""
    tiles, kt = tiles_and_steps(m, n, k, key)
    if kt < 2:
        return []
    out: list[str] = []
    textbook = -(-tiles * kt // programs)
    if textbook % kt:
        choices = [textbook]
        for s in range(2, 9):
            if kt % s == 0:
                aligned = -(-tiles * s // programs) * (kt // s)
                if textbook < aligned < kt and aligned not in choices:
                    choices.append(aligned)
        choices = sorted(choices)[:3]
        out += [f"a{x}" for x in choices] + [f"r{choices[0]}"]
    rest = tiles % programs
    if tiles > programs and rest:
        out.append(f"t{-(-rest * kt // programs)}")
        if tiles >= 2 * programs:
            out.append(f"h{-(-(rest + programs) * kt // programs)}")
    return out


def plan_split(m: int, n: int, k: int, key: str, mode: str) -> tuple[int, int, bool]:
    """(data-parallel tiles, steps per program, REG2) of candidate mode ``mode`` (``a44``, ``t12``, ``r39``)."""
    tiles, _ = tiles_and_steps(m, n, k, key)
    steps = int(mode[1:])
    programs = resident_count(key)
    dp = {"t": tiles - tiles % programs, "h": tiles - tiles % programs - programs}.get(mode[0], 0)
    if dp < 0:
        raise ValueError(f"{key} {mode} on {m}x{n}x{k}: {tiles} tiles, not two full waves of {programs}")
    return dp, steps, mode[0] == "r"


def resident_count(key: str) -> int:
    """Programs of config ``key`` resident at once (``tma_streamk.resident``); four in the interpreter, so that
    ``--check`` there has full waves to run data-parallel."""
    from theodolite.kernels.launch import interpreting
    from tma_streamk import resident

    return 4 if interpreting() else resident(key)


def plans_for(sets: list[tuple[Any, Any, Any]], key: str, _extra: Any = None) -> list[Any]:
    """Each (A, B, out) set's plan of ``tmab/<tile>/<mode>`` (the TMA config ``tma/<tile>``) with its kernel launch
    swapped for ``tma_balanced_kernel`` (ValueError where the TMA plan has no host descriptors)."""
    from theodolite.kernels.config import GemmConfig
    from theodolite.kernels.launch import _Launch, _locks, _workspace, plan_gemm

    head, mode = key.rsplit("/", 1)
    tma_key = "tma/" + head.split("/", 1)[1]
    config = GemmConfig.from_key(tma_key)
    out = []
    for a, b, o in sets:
        m, k = a.shape
        n = b.shape[1]
        tiles, kt = tiles_and_steps(m, n, k, tma_key)
        dp, steps, reg2 = plan_split(m, n, k, tma_key, mode)
        plan = plan_gemm(a, b, config, out=o)
        step = plan.steps[-1]
        if not step.kwargs.get("HOST_DESC"):
            raise ValueError(f"{key} on {m}x{n}x{k}: no host descriptors")
        rest_steps = (tiles - dp) * kt
        programs = -(-rest_steps // steps)
        max_pieces = -(-kt // steps) + 1
        ws = _workspace(o.device, (tiles - dp) * max_pieces * config.block_m * config.block_n)
        locks = _locks(o.device, tiles - dp)
        kwargs = dict(step.kwargs, dp_tiles=dp, steps=steps, max_pieces=max_pieces, CHUNKS=CHUNKS, REG2=reg2)
        grid = (max(programs, 1),)
        plan.steps[-1] = _Launch(tma_balanced_kernel, grid, (*step.args[:7], ws, locks), kwargs)  # not b1_ptr (no composite tiles)
        out.append(plan)
    return out


def candidates(s: Any, every: bool) -> list[str]:
    """``tmab/<tile>/<mode>`` for every TMA tile of the space (unflattened) and partition choice on this shape; none
    for batched or misaligned shapes, or (without ``every``) where the final round reads at or over BAR."""
    from theodolite.kernels.config import config_space

    if s.batch != 1 or s.N % 8 or s.K % 8:  # TMA reads aligned rows; misaligned operands would be copied first
        return []
    final = s.final_ms or {}
    ours = [t for c, t in final.items() if c != "torch" and t]
    if not every and (not final.get("torch") or not ours or final["torch"] / min(ours) >= BAR):
        return []
    keys = []
    for c in config_space("bf16", ("tma",)):
        tile = c.key.split("/", 1)[1].removesuffix("/f")
        for mode in partitions(s.M, s.N, s.K, c.key, resident_count(c.key)):
            key = f"tmab/{tile}/{mode}"
            if key not in keys:
                keys.append(key)
    return keys


def check() -> None:
    """Forced partitions (pieces of 1 to 4 per tile, full waves data-parallel or not) against torch.matmul."""
    import torch
    from theodolite.kernels.launch import interpreting

    device = torch.device("cpu" if interpreting() else "cuda")
    dtype = torch.float16 if interpreting() else torch.bfloat16
    cases = [(96, 80, 200, "tmab/64x32x16/g8/w4/s2/k1/a3"), (96, 80, 200, "tmab/64x32x16/g8/w4/s2/k1/r7"),
             (130, 72, 96, "tmab/64x32x32/g8/w4/s2/k1/a2"),
             (130, 72, 96, "tmab/64x32x32/g8/w4/s2/k1/t1")]  # fmt: skip
    if interpreting():  # four programs resident there: two full waves of 64x32 tiles, then one balanced with the rest
        cases.append((130, 72, 96, "tmab/64x32x32/g8/w4/s2/k1/h4"))
    else:
        cases += [(768, 3200, 4224, "tmab/128x256x64/g8/w8/s4/k1/a39"),
                  (768, 3200, 4224, "tmab/128x256x64/g8/w8/s4/k1/r44"),
                  (512, 10240, 8192, "tmab/128x256x64/g8/w8/s4/k1/t28")]  # fmt: skip
    for m, n, k, key in cases:
        torch.manual_seed(0)
        a = torch.randn(m, k, device=device, dtype=dtype)
        b = torch.randn(k, n, device=device, dtype=dtype)
        o = torch.full((m, n), float("nan"), device=device, dtype=dtype)
        ref = (a.float() @ b.float()).to(dtype)
        plan = plans_for([(a, b, o)], key)[0]
        plan.run()
        first = o.clone()
        plan.run()
        err = ((o.float() - ref.float()).abs().max() / ref.float().abs().max()).item()
        print(f"{m}x{n}x{k} {key}: rel err {err:.2e}, repeat bitwise {bool(torch.equal(first, o))}", flush=True)
        assert math.isfinite(err) and err < 1e-2 and torch.equal(first, o), key


def main() -> None:
    from harness import fastest, gpu_name, time_candidates

    from theodolite.results import load_results

    if "--check" in sys.argv:
        check()
        return
    every = "--all" in sys.argv
    only = sys.argv[sys.argv.index("--only") + 1].split(",") if "--only" in sys.argv else None
    gpu = gpu_name()
    todo = []
    for suite in ("llm", "random-dev"):
        for s in load_results(f"reports/results/validate-{suite}-{gpu}.json").shapes:
            if only is not None and s.name not in only:
                continue
            extra = candidates(s, every or only is not None)
            if extra:
                todo.append((f"{suite}:{s.name}", s.M, s.N, s.K, fastest(s.configs, 3), extra))
    script = "tma_balanced.py" + " --all" * every + (f" --only {','.join(only)}" if only else "")
    path = time_candidates(todo, "balanced", f"tma-balanced-{gpu}", script, plans_for)
    print("wrote", path, file=sys.stderr)


if __name__ == "__main__":
    main()
