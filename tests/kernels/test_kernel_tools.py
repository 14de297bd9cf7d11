"""CPU tests of the kernels' tooling: shape suites, the bench command's argument checks, offline compiles."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import pytest
from theodolite.kernels.config import GemmConfig, KernelLimits, Problem, legality
from theodolite.kernels.shapes import ShapeSuiteError, load_suite

from theodolite.errors import TheodoliteError


def test_bundled_suites() -> None:
    llm = load_suite("llm")
    dev = load_suite("random-dev")
    assert len(llm) == 96 and len(dev) == 200
    assert all(m >= 1 and n >= 1 and k >= 1 for _, m, n, k in llm + dev)
    assert load_suite("square")[0] == ("square256", 256, 256, 256)
    assert load_suite("random:5:3") == load_suite("random:5:3") and len(load_suite("random:5:3")) == 5


def test_csv_suite_and_errors(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "s.csv"
    path.write_text("# comment\nname,M,N,K,dtype\nx,1,2,3,bf16\n")
    assert load_suite(str(path)) == [("x", 1, 2, 3)]
    path.write_text("name,M,N,K\nx,1,-2,3\n")
    with pytest.raises(ShapeSuiteError):
        load_suite(str(path))
    with pytest.raises(ShapeSuiteError):
        load_suite("nope")
    with pytest.raises(ShapeSuiteError):
        load_suite("random:x:1")


def test_bench_argument_errors() -> None:
    from theodolite.commands import bench

    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    with pytest.raises(TheodoliteError, match="shard"):
        bench.run(parser.parse_args(["--shard", "3/2"]))
    with pytest.raises(TheodoliteError, match="variant"):
        bench.run(parser.parse_args(["--variants", "nope"]))
    with pytest.raises(TheodoliteError, match="config key"):
        bench.run(parser.parse_args(["--config", "persistent/1x2"]))
    assert bench._shard(list(range(10)), "1/3") == [1, 4, 7]


def test_splitk_only_for_few_tiles() -> None:
    limits = KernelLimits("sm_90", 227 * 1024, 65536, 255, 1024, 32, 132)
    split = GemmConfig("splitk", 64, 64, 128, 8, 4, 3, 2)
    assert legality(split, Problem(128, 4096, 4096), limits) is None
    assert "few output tiles" in legality(split, Problem(4096, 4096, 4096), limits)


def _compile_offline(code: str, timeout: int) -> None:
    """Run ``code`` (which prints 'ok') in a fresh process without TRITON_INTERPRET, so it compiles for sm_90:
    other test modules here import the kernels under the interpreter."""
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=timeout)
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr[-2000:]


def test_compile_one_offline() -> None:
    """Compiles for sm_90 without a GPU (Triton bundles ptxas) and reads registers/spills/shared memory."""
    pytest.importorskip("triton")
    code = (
        "from theodolite.kernels.build import compile_one\n"
        "b = compile_one('persistent/64x64x64/g8/w4/s3/k1', 'bf16')\n"
        "assert b.architecture == 'sm_90' and b.n_regs > 0 and b.n_spills >= 0, b\n"
        "assert b.shared_bytes > 0 and b.num_stages == 3, b\n"
        "print('ok', b.n_regs)\n"
    )
    _compile_offline(code, timeout=240)


def test_element_wise_beside_vectors_builds_its_own_binary() -> None:
    """ "scalar-b" compiles A as 16-byte vectors (pipelined through cp.async stages: more shared memory, more
    registers) and B element-wise: a binary of its own.  In persistent 128x128x64 w8 s3 flattened that mix spilled
    536 B with a 64-bit pointer per element-wise load; with int32 offsets (SCALAR_OFFSETS) neither build spills."""
    pytest.importorskip("triton")
    code = (
        "from theodolite.kernels.build import compile_one\n"
        "key = 'persistent/128x128x64/g8/w8/s3/k1/f'\n"
        "scalar = compile_one(key, 'bf16', loads='scalar')\n"
        "mixed = compile_one(key, 'bf16', loads='scalar-b')\n"
        "assert scalar.n_spills == 0 and mixed.n_spills == 0, (scalar, mixed)\n"
        "assert mixed.shared_bytes > scalar.shared_bytes and mixed.n_regs > scalar.n_regs, (scalar, mixed)\n"
        "assert mixed.loads == 'scalar-b', mixed\n"
        "print('ok', scalar.n_regs, mixed.n_regs)\n"
    )
    _compile_offline(code, timeout=300)


def test_element_wise_loads_run_along_the_contiguous_dimension() -> None:
    """An element-wise operand's clamped offsets hide their contiguity; Triton 3.6 then laid a row-major B tile's 32
    threads of a warp along K (32 rows per load, 1.2x slower over 62 random-dev shapes: experiments'
    scalar_coalesce.py).  With ``SCALAR_COALESCE`` every element-wise tile's threads run along its contiguous
    dimension, in each layout: B's rows (N) in nn/tn, A's rows (K) in nn/nt, down the columns otherwise."""
    pytest.importorskip("triton")
    code = (
        "import re, triton\n"
        "from triton.backends.compiler import GPUTarget\n"
        "from theodolite.kernels.build import _source\n"
        "from theodolite.kernels.config import GemmConfig\n"
        "config = GemmConfig.from_key('splitk/64x64x128/g8/w4/s4/k8')\n"
        "target = GPUTarget('cuda', 90, 32)\n"
        "options = triton.compiler.make_backend(target).parse_options({'num_warps': 4, 'num_stages': 4})\n"
        "for layout in ('nn', 'tn', 'nt', 'tt'):\n"
        "    _, source = _source(config, 'bf16', layout, 'scalar')\n"
        "    ttgir = triton.compile(source, target=target, options=options.__dict__).asm['ttgir']\n"
        "    layouts = dict(re.findall(r'^(#blocked\\d*) = (.*)$', ttgir, re.M))\n"
        "    loads = re.findall(r'tt.load .*tensor<(\\d+)x(\\d+)x!tt.ptr<bf16>, (#blocked\\d*)>', ttgir)\n"
        "    assert len(loads) == 2, (layout, loads)\n"
        "    for rows, cols, name in loads:\n"
        "        operand = 'a' if (int(rows), int(cols)) == (64, 128) else 'b'\n"
        "        # A [M, K] is contiguous along K (dim 1) when row-major ('n'), B [K, N] along N (dim 1) when 'n'\n"
        "        along = 1 if layout[0 if operand == 'a' else 1] == 'n' else 0\n"
        "        warp = [int(x) for x in re.search(r'threadsPerWarp = \\[(\\d+), (\\d+)\\]', layouts[name]).groups()]\n"
        "        assert warp[along] >= 16, (layout, operand, layouts[name])\n"
        "print('ok')\n"
    )
    _compile_offline(code, timeout=300)


def test_splitk_reduction_registers_do_not_grow_with_the_split() -> None:
    """The last slice's reduction loops over the slices: 16 slices compile to the registers of 2, no spills (an
    unrolled loop kept every partial live: 64x128 k4 spilled 132 B, k16 2.5 KB)."""
    pytest.importorskip("triton")
    code = (
        "from theodolite.kernels.build import compile_one\n"
        "two = compile_one('splitk/64x128x64/g8/w4/s4/k2', 'bf16')\n"
        "deep = compile_one('splitk/64x128x64/g8/w4/s4/k16', 'bf16')\n"
        "assert deep.n_spills == 0 and two.n_spills == 0, (two, deep)\n"
        "assert deep.n_regs <= two.n_regs + 8, (two.n_regs, deep.n_regs)\n"
        "print('ok', two.n_regs, deep.n_regs)\n"
    )
    _compile_offline(code, timeout=300)


def test_bundled_profiles_build_every_splitk_config_without_spills() -> None:
    """Every split-K config of the space has a spill-free 16-byte-load build in the measured profiles, so legality
    keeps them all (the profiles' builds are refreshed with ``python -m theodolite.probes.builds``)."""
    from pathlib import Path

    from theodolite.kernels.config import config_space

    from theodolite.profile import load as load_profile

    root = Path(__file__).resolve().parents[2] / "profiles"
    for name in ("nvidia-h100-80gb-hbm3.h5", "nvidia-h200.h5"):
        profile = load_profile(str(root / name))
        for config in config_space("bf16", ("splitk",)):
            build = profile.kernel_build("splitk", config.key, "bf16", "vector")
            assert build is not None and build.n_spills == 0, (name, config.key, build)


def test_rotation_count() -> None:
    """Rotated timing: enough input copies to exceed twice the L2 (capped); none when inputs are large."""
    from theodolite.kernels.benchmark import rotation_count

    l2 = 50 * 2**20
    assert rotation_count(10 * 2**20, l2) == 11  # 11 x 10 MiB > 2 x 50 MiB
    assert rotation_count(1024, l2) == 32  # tiny: capped
    assert rotation_count(30 * 2**20, l2) == 0  # over half the L2: flushed timing
    assert rotation_count(1024, 0) == 0  # L2 unknown: flushed timing


def test_launch_cache_key() -> None:
    """gemm()'s launch-cache key tells apart what a plan depends on (shape, strides, alignment, out, epilogue)."""
    torch = pytest.importorskip("torch")
    from theodolite.kernels.launch import _fast_key

    config = GemmConfig("persistent", 64, 64, 64, 8, 4, 4)
    a, b = torch.randn(64, 32), torch.randn(32, 48)
    out = torch.empty(64, 48)

    def key(*args, **kw):  # type: ignore[no-untyped-def]
        full = dict(out=None, alpha=1.0, beta=0.0, c=None, bias=None, out_dtype=None, num_sms=None,
                    a_scale=None, b_scale=None, precision=None)  # fmt: skip
        full.update(kw)
        return _fast_key(*args, config, *full.values())

    base = key(a, b)
    assert base == key(torch.randn(64, 32), torch.randn(32, 48))  # new data, same metadata: a hit
    assert base != key(a, b.t().contiguous().t())  # layout
    assert base != key(torch.randn(64 * 32 + 1)[1:].view(64, 32), b)  # 16-byte alignment of the pointer
    # misaligned rows: a base 8 bytes off reads 8-byte vectors, 4 bytes off 4-byte ones: different plans
    rows = torch.randn(64 * 34 + 8, dtype=torch.float16)
    eight, four = rows[4 : 4 + 64 * 34].view(64, 34), rows[2 : 2 + 64 * 34].view(64, 34)
    b2 = torch.randn(34, 48, dtype=torch.float16)
    assert key(eight, b2) != key(four, b2)
    assert base != key(a, b, out=out) and key(a, b, out=out) == key(a, b, out=torch.empty(64, 48))
    assert key(a, b, bias=torch.randn(48)) != key(a, b, c=torch.randn(48))
    assert key(a, b, a_scale=2.0) not in (None, base) and key(a, b, a_scale="2") is None
    assert key(a, b, alpha=[1]) is None
    assert _fast_key(a, b, "not a config", *([None] * 10)) is None


def _fake_timer(base_ms: list[float], drift_per_batch: float, capture_fails: bool = False):  # type: ignore[no-untyped-def]
    """A Timer whose batches (eager or graph replays) take base time + a drift that grows with every batch
    timed (host/clock drift)."""
    from theodolite.kernels.benchmark import Timer

    timer = Timer.__new__(Timer)
    timer.cutoff, timer.batch_us, timer.batches, timer.min_reps = 3.0, 300.0, 5, 3
    state = {"batches": 0}

    def batched(fns, calls, count):  # type: ignore[no-untyped-def]
        out = []
        for _ in range(count):
            out.append(base_ms[fns[0]()] + drift_per_batch * state["batches"])
            state["batches"] += 1
        return out

    def graph(fns, calls):  # type: ignore[no-untyped-def]
        if capture_fails:
            raise RuntimeError("operation not permitted when stream is capturing")
        return fns[0]()

    def replayed(index, calls):  # type: ignore[no-untyped-def]
        state["batches"] += 1
        return base_ms[index] + drift_per_batch * (state["batches"] - 1)

    timer._batched = batched  # type: ignore[method-assign]
    timer._graph = graph  # type: ignore[method-assign]
    timer._replayed = replayed  # type: ignore[method-assign]
    return timer


def test_interleaved_timing_shares_drift_and_cuts_slow_candidates() -> None:
    """Equal candidates stay equal under drift (timed one after another, the last would look 2x slower);
    a 5x slower one keeps its estimate; the reference is timed even when slow."""
    base = [0.010, 0.010, 0.010, 0.010, 0.050]
    candidates = [[lambda i=i: i] for i in range(len(base))]
    timer = _fake_timer(base, drift_per_batch=0.0005)
    times = timer.interleaved(candidates, keep=[4])
    spread = max(times[:4]) / min(times[:4])
    assert spread < 1.15, times
    sequential = _fake_timer(base, drift_per_batch=0.0005)
    one_by_one = [sequential(c) for c in candidates[:4]]  # the old order: each candidate's batches together
    assert max(one_by_one) / min(one_by_one) > 1.5 * spread
    timer = _fake_timer(base, drift_per_batch=0.0)
    times = timer.interleaved(candidates)
    assert times[4] == pytest.approx(0.050)  # cut after its estimate, which is kept
    assert times[:4] == pytest.approx([0.010] * 4) and timer.last_mode == "graph"


def test_a_shape_that_cannot_be_captured_is_timed_eagerly_and_says_so() -> None:
    base = [0.010, 0.020]
    timer = _fake_timer(base, drift_per_batch=0.0, capture_fails=True)
    times = timer.interleaved([[lambda i=i: i] for i in range(2)])
    assert times == pytest.approx(base)
    assert timer.last_mode.startswith("eager (graph capture failed: RuntimeError")


def test_bundled_profiles_carry_every_load_class_build() -> None:
    """Each pointer-based config has a build per load class (KERNEL_LOADS) in the measured profiles, so a
    misaligned problem is judged by the binary it runs, not a fallback."""
    from pathlib import Path

    from theodolite.kernels.config import config_space

    from theodolite.profile import load as load_profile
    from theodolite.profile.schema import KERNEL_LOADS

    root = Path(__file__).resolve().parents[2] / "profiles"
    for name in ("nvidia-h100-80gb-hbm3.h5", "nvidia-h200.h5"):
        profile = load_profile(str(root / name))
        for config in config_space("bf16"):
            if config.variant == "tma":
                continue
            for loads in KERNEL_LOADS:
                build = profile.kernel_build(config.variant, config.key, "bf16", loads)
                assert build is not None, (name, config.key, loads)


def test_a_timed_replay_is_queued_behind_a_spin(monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPU spins before a replay's start event, so the host's graph launch falls on the spin rather than between
    the events (unspun, an empty kernel read 1.5-3.6 us per call against 0.7); a spin of 0 keeps the old order."""
    from theodolite.kernels import benchmark

    calls: list[str] = []

    class Event:
        def __init__(self, enable_timing: bool = False) -> None:
            self.name = "start" if not any(c.startswith("event") for c in calls) else "end"
            calls.append(f"event {self.name}")

        def record(self) -> None:
            calls.append(f"record {self.name}")

        def elapsed_time(self, other: object) -> float:
            return 8.0

    class Graph:
        def replay(self) -> None:
            calls.append("replay")

    monkeypatch.setattr(benchmark.torch.cuda, "Event", Event)
    monkeypatch.setattr(benchmark.torch.cuda, "_sleep", lambda cycles: calls.append(f"spin {cycles}"))
    monkeypatch.setattr(benchmark.torch.cuda, "synchronize", lambda: calls.append("sync"))
    timer = benchmark.Timer.__new__(benchmark.Timer)
    timer.replay_spin_cycles = benchmark.REPLAY_SPIN_CYCLES
    assert timer._replayed(Graph(), 4) == pytest.approx(2.0)
    timed = [c for c in calls if not c.startswith("event")]
    assert timed == [f"spin {benchmark.REPLAY_SPIN_CYCLES}", "record start", "replay", "record end", "sync"]
    calls.clear()
    timer.replay_spin_cycles = 0
    timer._replayed(Graph(), 4)
    assert [c for c in calls if not c.startswith("event")] == ["record start", "replay", "record end", "sync"]


def test_timer_refuses_an_unknown_flush() -> None:
    """The flush is named before any GPU is touched: a typo is a clear error, not a silently different timing."""
    from theodolite.kernels.benchmark import FLUSHES, Timer

    assert FLUSHES[0] == "read"  # the default leaves the L2 clean
    with pytest.raises(ValueError, match="flush must be one of read, write"):
        Timer(flush="zero")


def test_flushed_timing_follows_the_rotation_rule() -> None:
    from theodolite.kernels.benchmark import flushed_timing

    l2 = 50 * 2**20
    assert flushed_timing(30 * 2**20, l2) and not flushed_timing(20 * 2**20, l2)
