"""Device check (run on the GPU machine): GPU tests, then the issue-4 shapes through every legal config.

``python -m theodolite.kernels.devcheck OUT_DIR [--tests S] [--issue] [--sweep SUITE=PATH ...] [--deadline S]``
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
    stats = {}
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
