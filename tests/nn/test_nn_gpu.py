"""GPU tests of theodolite.ops / theodolite.nn: CUDA graph capture and replay (a split-K pick included),
torch.compile(fullgraph=True) with inductor, bf16 gradients against torch, the fallback on an unsupported dtype."""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402

pytestmark = pytest.mark.gpu


def rel_err(got: torch.Tensor, want: torch.Tensor) -> float:
    return float((got.float() - want.float()).abs().max() / want.float().abs().max().clamp_min(1e-6))


def splitk_shape() -> tuple[int, int, int]:
    """An (M, N, K) whose pick on this GPU's profile is split-K (decode-sized, long K)."""
    from theodolite.kernels.launch import problem_of

    from theodolite import api

    for m, n, k in ((8, 4096, 4096), (8, 4096, 14336), (1, 4096, 4096), (16, 1024, 8192)):
        x = torch.empty(m, k, dtype=torch.bfloat16, device="cuda")
        w = torch.empty(n, k, dtype=torch.bfloat16, device="cuda")
        if api.select_problem(problem_of(x, w.t())).config.variant == "splitk":
            return m, n, k
    pytest.skip("no split-K pick among the decode shapes on this profile")


@pytest.mark.parametrize("shape", ["splitk", (256, 1024, 512), (33, 200, 72)])
def test_cuda_graph_capture_and_replay(shape: object) -> None:
    from theodolite import ops

    m, n, k = splitk_shape() if shape == "splitk" else shape  # type: ignore[misc]
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * k**-0.5
    b = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream), torch.no_grad():
        ops.linear(x, w, b)  # warm-up: Triton compiles outside the capture
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph), torch.no_grad():
        y = ops.linear(x, w, b)
    for _ in range(3):
        x.copy_(torch.randn_like(x))
        graph.replay()
        torch.cuda.synchronize()
        assert rel_err(y, F.linear(x, w, b)) < 1e-2


def test_split_k_back_to_back_in_one_graph() -> None:
    """Consecutive split-K launches share the workspace and arrival counters: replays stay right."""
    from theodolite import ops

    m, n, k = splitk_shape()
    xs = [torch.randn(m, k, device="cuda", dtype=torch.bfloat16) for _ in range(3)]
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * k**-0.5
    with torch.no_grad():
        for x in xs:
            ops.linear(x, w)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            ys = [ops.linear(x, w) for x in xs]
    for _ in range(5):
        graph.replay()
    torch.cuda.synchronize()
    for x, y in zip(xs, ys, strict=True):
        assert rel_err(y, F.linear(x, w)) < 1e-2


def test_compile_fullgraph_inductor_patched_block() -> None:
    from theodolite import patch

    torch._dynamo.reset()
    torch.manual_seed(0)
    block = torch.nn.Sequential(
        torch.nn.Linear(512, 1024), torch.nn.SiLU(), torch.nn.Linear(1024, 512, bias=False)
    ).cuda().to(torch.bfloat16)  # fmt: skip
    x = torch.randn(4, 37, 512, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        want = block(x)
        patch(block)
        explained = torch._dynamo.explain(block)(x)
        assert explained.graph_break_count == 0
        compiled = torch.compile(block, fullgraph=True)
        assert rel_err(compiled(x), want) < 2e-2
        assert rel_err(compiled(x[:, :20]), block(x[:, :20])) < 2e-2


@pytest.mark.parametrize("rows", [1, 8, 37])
def test_compile_traced_operator(rows: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """With THEODOLITE_TRACED_LINEAR's switch on, a compiled patched block runs its projections through the traced
    operator (Inductor launches the kernels): no graph break, outputs as torch's, a recipe for the decode shapes."""
    from theodolite import ops, patch, traced_ops

    monkeypatch.setattr(ops._traced, "ENABLED", True)
    torch._dynamo.reset()
    torch.manual_seed(0)
    block = torch.nn.Sequential(
        torch.nn.Linear(1024, 4096), torch.nn.SiLU(), torch.nn.Linear(4096, 1024, bias=False)
    ).cuda().to(torch.bfloat16)  # fmt: skip
    x = torch.randn(rows, 1024, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        want = block(x)
        patch(block)
        compiled = torch.compile(block, fullgraph=True)
        assert rel_err(compiled(x), want) < 2e-2
        assert rel_err(compiled(x), want) < 2e-2  # a second call: the generated launch, not the first compile
    recipe = traced_ops.recipe_for(x, block[0].weight, block[0].bias)
    pick = ops._linear_runner(x, block[0].weight, block[0].bias).gemm.config.key  # type: ignore[attr-defined]
    assert recipe is None or recipe.config_key == pick
    if not pick.startswith("tma/"):
        assert recipe is not None, pick


def test_compile_reduce_overhead_cuda_graphs() -> None:
    from theodolite import patch

    torch._dynamo.reset()
    lin = torch.nn.Linear(1024, 2048, device="cuda", dtype=torch.bfloat16)
    patch(lin)
    compiled = torch.compile(lin, mode="reduce-overhead", fullgraph=True)
    with torch.no_grad():
        for _ in range(4):
            x = torch.randn(64, 1024, device="cuda", dtype=torch.bfloat16)
            assert rel_err(compiled(x), F.linear(x, lin.weight, lin.bias)) < 1e-2


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_mlp_gradients_match_torch(dtype: torch.dtype) -> None:
    from theodolite import patch

    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 128)).cuda()
    mlp = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 128)).cuda()
    mlp.load_state_dict(ref.state_dict())
    mlp.to(dtype)
    patch(mlp)
    x = torch.randn(3, 50, 256, device="cuda")
    xm = x.to(dtype).clone().requires_grad_()  # a leaf of its own (to(float32) of fp32 data is x itself)
    xr = x.clone().requires_grad_()  # fp32 reference
    g = torch.randn(3, 50, 128, device="cuda")
    (mlp(xm).float() * g).sum().backward()
    (ref(xr) * g).sum().backward()
    tol = 1e-3 if dtype == torch.float32 else 3e-2
    assert rel_err(xm.grad, xr.grad) < tol  # type: ignore[arg-type]
    for p, pr in zip(mlp.parameters(), ref.parameters(), strict=True):
        assert rel_err(p.grad, pr.grad) < tol  # type: ignore[arg-type]


def test_float64_falls_back_with_one_warning() -> None:
    from theodolite import ops
    from theodolite.errors import FallbackWarning

    ops.clear_caches()
    x = torch.randn(4, 8, device="cuda", dtype=torch.float64)
    w = torch.randn(6, 8, device="cuda", dtype=torch.float64)
    with pytest.warns(FallbackWarning, match="float64"):
        out = ops.linear(x, w)
    torch.testing.assert_close(out, F.linear(x, w))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ops.linear(x, w)
