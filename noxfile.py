"""Sessions: tests, lint, calibrate, select, bench, validate, report. Each is a thin call of the CLI.

CPU sessions pin what CI needs: torch 2.13.0 (the CPU wheel), triton 3.6.0, and numpy < 2.4
(Triton 3.6's interpreter, which the CPU kernel tests run on, needs it).  GPU sessions install the
package into the current interpreter's environment instead (``--no-venv`` is implied by
``venv_backend="none"``), because the GPU machine's torch/triton must be used as they are.
"""

from __future__ import annotations

import os
from pathlib import Path

import nox

nox.options.sessions = ["tests", "lint"]
nox.options.reuse_existing_virtualenvs = True

CPU_PINS = ["torch==2.13.0", "triton==3.6.0", "numpy<2.4"]
# a folder of wheels (the CPU torch wheel) for machines that cannot reach the PyTorch index
LOCAL_WHEELS = Path(os.environ.get("THEODOLITE_WHEELS", "/opt/wheels"))


def _install_cpu_stack(session: nox.Session, extras: str) -> None:
    find_links = ["--find-links", str(LOCAL_WHEELS)] if LOCAL_WHEELS.is_dir() else []
    if not find_links:
        find_links = ["--extra-index-url", "https://download.pytorch.org/whl/cpu"]
    session.install(*find_links, *CPU_PINS)
    session.install(*find_links, f".[{extras}]", *CPU_PINS)


@nox.session
def tests(session: nox.Session) -> None:
    """The CPU test suite (kernels through Triton's interpreter; GPU tests skip)."""
    _install_cpu_stack(session, "test,report,fleet")  # fleet: Ray, for the fleet tests on a local instance
    env = {"TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES", "")}
    session.run("pytest", "-q", "-m", "not gpu", *session.posargs, env=env)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff and mypy on the package."""
    _install_cpu_stack(session, "dev,test,report")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", "theodolite", "model", "probes", "kernels", "reports", "tests")
    session.run("mypy", "theodolite", "model", "probes", "kernels", "reports")


def _cli(session: nox.Session, *arguments: str) -> None:
    session.run("python", "-m", "theodolite", *arguments, *session.posargs)


@nox.session
def select(session: nox.Session) -> None:
    """The main job: the model's picks for a few LLM shapes (uses the bundled profile without a GPU)."""
    _install_cpu_stack(session, "report")
    session.run("python", "-m", "theodolite", "select", *session.posargs, env={"TRITON_INTERPRET": "1"})


@nox.session(venv_backend="none")
def calibrate(session: nox.Session) -> None:
    """Measure this machine's GPU into a profile (run on the GPU machine)."""
    session.run("python", "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "-e", ".")
    _cli(session, "calibrate")


@nox.session(venv_backend="none")
def bench(session: nox.Session) -> None:
    """Time every kernel config against torch.matmul (GPU)."""
    session.run("python", "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "-e", ".")
    _cli(session, "bench")


@nox.session(venv_backend="none")
def validate(session: nox.Session) -> None:
    """Measure the model's picks against the exhaustive best (GPU)."""
    session.run("python", "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "-e", ".")
    _cli(session, "validate")


@nox.session
def report(session: nox.Session) -> None:
    """Render the HTML reports of the bundled profiles (or of the paths given after --)."""
    _install_cpu_stack(session, "report")
    _cli(session, "report")
