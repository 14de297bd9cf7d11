"""Device check (run on the GPU machine): GPU tests, host overhead, then shapes through every legal config.

``python -m theodolite.kernels.devcheck OUT_DIR [--tests S] [--host] [--quick] [--issue] [--sweep SUITE=PATH ...]
[--deadline S]``
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

ISSUE_SHAPES = [
    ("sq8192", 8192, 8192, 8192),
    ("sq4096", 4096, 4096, 4096),
    ("sq1024", 1024, 1024, 1024),
    ("m16", 16, 4096, 4096),
    ("m128", 128, 4096, 4096),
    ("misaligned", 3000, 1500, 7000),
    ("odd", 777, 5555, 2222),
    ("vocab", 64, 128256, 4096),
]


# Small and mid shapes where torch.matmul won the first H100 sweep (host overhead, small M, short K).
QUICK_SHAPES = [
    ("dev176", 128, 128, 128),
    ("dev173", 53, 1951, 83),
    ("dev175", 324, 6757, 146),
    ("dev172", 128, 128, 9984),
    ("dev131", 30, 1289, 5177),
    ("dev037", 21, 814, 808),
    ("dev145", 15152, 20, 386),
    ("dev137", 194, 7828, 1362),
    ("dev124", 768, 3200, 4224),
    ("decode-qkv", 1, 6144, 4096),
    ("m16", 16, 4096, 4096),
    ("llm-512", 512, 10240, 8192),
]


def host_overhead(out: Path, calls: int = 1000) -> dict[str, dict[str, float]]:
    """Microseconds per call of 1000 back-to-back calls (CPU timer, one synchronize at the end).

    ``enqueue_us`` is the CPU time of the loop alone (what the host spends per call); ``wall_us``
    includes the wait for the GPU (the larger of host and kernel time per call).
    """
    import torch
    from theodolite.kernels.config import GemmConfig

    def clock(fn: object) -> tuple[float, float]:
        for _ in range(50):
            fn()  # type: ignore[operator]
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()  # type: ignore[operator]
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        return (t1 - t0) / calls * 1e6, (t2 - t0) / calls * 1e6

    report: dict[str, dict[str, float]] = {}
    cases = [
        ("128x128x128", 128, 128, 128, GemmConfig("persistent", 64, 64, 64, 8, 4, 4)),
        ("16x4096x4096", 16, 4096, 4096, GemmConfig("persistent", 16, 64, 128, 8, 4, 4)),
        ("16x4096x4096-splitk", 16, 4096, 4096, GemmConfig("splitk", 16, 64, 128, 8, 4, 4, 4)),
        ("128x128x128-tma", 128, 128, 128, GemmConfig("tma", 64, 64, 128, 8, 4, 4)),
    ]
    for name, m, n, k, config in cases:
        report[name] = {}
        for label, fn in _host_rows(m, n, k, config).items():
            enqueue, wall = clock(fn)
            report[name][f"{label} enqueue_us"] = round(enqueue, 2)
            report[name][f"{label} wall_us"] = round(wall, 2)
            print(f"host {name:22s} {label:26s} enqueue {enqueue:7.2f} us  wall {wall:7.2f} us", flush=True)
    (out / "host-overhead.json").write_text(json.dumps(report, indent=1))
    return report


def _host_rows(m: int, n: int, k: int, config: object) -> dict[str, object]:
    """The calls host_overhead times for one shape: torch, gemm(), a prepared plan, the raw launch, Triton's binder."""
    import torch
    from theodolite.kernels.launch import gemm, plan_gemm

    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    o = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    plan = plan_gemm(a, b, config, out=o)
    plan.run()
    steps = plan.steps
    raw = [(step.runner, step.ordered) for step in steps]  # type: ignore[attr-defined]

    def raw_launch() -> None:
        for runner, ordered in raw:
            runner(*ordered)

    def triton_binder() -> None:  # the previous path: Triton's JIT binder at every launch
        for step in steps:
            step.kernel[step.grid](*step.args, **step.kwargs)  # type: ignore[attr-defined]

    return {
        "torch.matmul": lambda: torch.matmul(a, b),
        "torch.matmul(out=)": lambda: torch.matmul(a, b, out=o),
        "gemm": lambda: gemm(a, b, config),
        "gemm(out=)": lambda: gemm(a, b, config, out=o),
        "plan.run": plan.run,
        "raw launch": raw_launch,
        "triton binder": triton_binder,
        "plan_gemm+run (uncached)": lambda: plan_gemm(a, b, config, out=o).run(),
    }


def _tests(out: Path, timeout: float) -> None:
    t0 = time.time()
    repo = Path(__file__).resolve().parents[1]
    test_file = str(repo / "tests" / "kernels" / "test_gpu_kernels.py")
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", "--rootdir", str(repo), test_file]
    try:  # cwd elsewhere: the repository's theodolite/ folder must not shadow the installed package
        test = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=out)
        text, rc = test.stdout + test.stderr, str(test.returncode)
    except subprocess.TimeoutExpired as expired:
        raw = expired.stdout or b""
        text, rc = (raw.decode() if isinstance(raw, bytes) else raw) + "\n[timed out]", "timeout"
    (out / "gpu-tests.txt").write_text(text)
    print(text[-2500:])
    print(f"gpu tests: rc={rc} in {time.time() - t0:.0f}s", flush=True)


def _per_variant(results: object) -> None:
    for shape in results.shapes:  # type: ignore[attr-defined]
        per_variant: dict[str, tuple[float, str]] = {}
        for key, ms in shape.configs.items():
            if ms is not None and (key.split("/")[0] not in per_variant or ms < per_variant[key.split("/")[0]][0]):
                per_variant[key.split("/")[0]] = (ms, key)
        parts = [f"{v}:{shape.tflops(ms):.0f}" for v, (ms, _) in sorted(per_variant.items())]
        failed = [k for k, v in shape.configs.items() if v is None]
        print(f"{shape.name:14s} {shape.M}x{shape.N}x{shape.K} torch {shape.tflops(shape.torch_ms) or 0:.0f} | "
              + " ".join(parts) + (f" | failed {len(failed)}: {list(shape.errors.items())[:2]}" if failed else ""))  # noqa: E501  # fmt: skip


def main(argv: list[str]) -> int:
    """OUT [--tests SECONDS] [--issue] [--sweep SUITE=PATH ...] [--deadline SECONDS]"""
    from theodolite.kernels.benchmark import BenchSettings, print_table, run_bench, summary
    from theodolite.kernels.shapes import load_suite

    t0 = time.time()
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    deadline = float(argv[argv.index("--deadline") + 1]) if "--deadline" in argv else 400.0
    if "--tests" in argv:
        _tests(out, float(argv[argv.index("--tests") + 1]))
    stats: dict[str, object] = {}
    if "--host" in argv:
        host_overhead(out)
    if "--quick" in argv:
        results = run_bench(QUICK_SHAPES, BenchSettings(dtype="bf16"), out / "quick-bf16.json", command="devcheck")
        _per_variant(results)
        print_table(results)
        stats["quick"] = summary(results)
        flushed = run_bench(
            QUICK_SHAPES[:6], BenchSettings(dtype="bf16", rotate=False), None, command="devcheck", log=lambda _: None
        )
        for shape in flushed.shapes:
            best = shape.best()
            print(
                f"flushed-only {shape.name}: torch {shape.torch_ms * 1e3:.1f} us best {best[1] * 1e3:.1f} us {best[0]}"
            )
    if "--issue" in argv:
        results = run_bench(
            ISSUE_SHAPES, BenchSettings(dtype="bf16"), out / "issue-shapes-bf16.json", command="devcheck"
        )
        _per_variant(results)
        stats["issue"] = summary(results)
    sweeps = [argv[i + 1] for i, arg in enumerate(argv) if arg == "--sweep"]
    for sweep in sweeps:
        suite, path = sweep.split("=")
        budget = deadline - (time.time() - t0) - 25
        if budget <= 0:
            print(f"no time left for {suite}")
            continue
        print(f"sweep {suite}: budget {budget:.0f}s", flush=True)
        command = f"python -m theodolite bench --shapes {suite} --dtype bf16 -o {Path(path).name} --resume"
        results = run_bench(
            load_suite(suite), BenchSettings(dtype="bf16", extra={"shapes": suite}, budget_s=budget),
            path, command=command, resume=path,
        )  # fmt: skip
        stats[suite] = summary(results)
        _per_variant(results)
        print_table(results)
    (out / "summary.json").write_text(json.dumps(stats, indent=1))
    print(json.dumps(stats, indent=1))
    print(f"total {time.time() - t0:.0f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
