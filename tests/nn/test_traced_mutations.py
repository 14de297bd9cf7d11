"""Inductor's analysis of which arguments a traced kernel writes, on our kernels: only the output and the split-K
scratch.  Were an operand reported written (the analysis falls back to "every argument" when it cannot read a
kernel), functionalization would copy the weights before every traced launch.  Runs on the CPU in a fresh process
(compiled kernels, not the interpreter's), with Triton's target set to sm_90 and planning allowed off a GPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
wrap = pytest.importorskip("torch._higher_order_ops.triton_kernel_wrap")
if not hasattr(wrap, "identify_accessed_tensors"):
    pytest.skip("this torch has no identify_accessed_tensors", allow_module_level=True)

SCRIPT = textwrap.dedent(
    """
    import json, torch
    from triton.backends.compiler import GPUTarget
    from triton.runtime.driver import driver

    class Target:  # Triton's active driver for TTIR generation only: no GPU is touched
        def get_current_target(self):
            return GPUTarget("cuda", 90, 32)

    driver.set_active(Target())
    import theodolite.kernels.launch as launch
    import theodolite.ops as ops
    launch.interpreting = lambda: True  # plan on CPU tensors
    ops._interpreting = lambda: True
    from theodolite import traced_ops
    from torch._higher_order_ops.triton_kernel_wrap import identify_accessed_tensors

    found = {}
    for m, n, k, dtype, with_bias in [(1, 20, 24, torch.float16, True), (1, 20, 256, torch.float32, False),
                                      (8, 4096, 4096, torch.float16, False)]:
        x, w = torch.randn(m, k).to(dtype), torch.randn(n, k).to(dtype)
        bias = torch.randn(n).to(dtype) if with_bias else None
        recipe = traced_ops.make_recipe(x, w, bias)
        args = traced_ops._arguments(recipe, x, w, torch.empty(m, n, dtype=dtype), bias)
        kwargs = {**dict(zip(recipe.kernel.arg_names, args)), **recipe.kwargs}
        accesses = identify_accessed_tensors(recipe.kernel, kwargs, {})
        found[recipe.config_key] = sorted(dep.name for dep in accesses.read_writes.writes)
    print(json.dumps(found))
    """
)


def test_inductor_sees_only_the_output_and_scratch_written() -> None:
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    variants = {key.split("/")[0] for key in found}
    assert variants == {"persistent", "splitk"}, found
    for key, writes in found.items():
        allowed = {"out_ptr", "ws_ptr", "lock_ptr"} if key.startswith("splitk/") else {"out_ptr"}
        assert "out_ptr" in writes and set(writes) <= allowed, (key, writes)
