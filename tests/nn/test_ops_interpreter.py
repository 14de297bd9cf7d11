"""CPU tests of theodolite::linear / theodolite::mm in Triton's interpreter (fp16/fp32, small shapes): values against
torch, torch.library.opcheck, gradients through the kernels, the runner cache, and the fallback's single warning; and of
theodolite::linear_traced (the compiled path's traced operator): its eager body against torch, the recipe a pick becomes
(scratch of exact size, the device cache untouched), the same recipe from fake tensors, the opaque operator where no
recipe applies, and ops.linear's routing under compile."""

from __future__ import annotations

import os
import types
import warnings

import pytest

torch = pytest.importorskip("torch")
if torch.cuda.is_available():
    pytest.skip("interpreter tests run on CPU-only machines", allow_module_level=True)
os.environ["TRITON_INTERPRET"] = "1"  # before the kernels are imported: @triton.jit reads it then

import torch.nn.functional as F  # noqa: E402
from theodolite.kernels import buffers  # noqa: E402
from theodolite.kernels.config import GemmConfig  # noqa: E402

from theodolite import api, ops, traced_ops  # noqa: E402
from theodolite.errors import FallbackWarning  # noqa: E402

TOL = {torch.float32: 1e-5, torch.float16: 2e-2}


def close(got: torch.Tensor, want: torch.Tensor, dtype: torch.dtype) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype
    scale = max(want.double().abs().max().item(), 1e-6)
    err = (got.double() - want.double()).abs().max().item() / scale
    assert err <= TOL[dtype], f"max rel error {err}"


@pytest.fixture(autouse=True)
def _fresh() -> None:
    ops.clear_caches()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("lead", [(8,), (2, 3), (1,)])
@pytest.mark.parametrize("with_bias", [True, False])
def test_linear_matches_torch(dtype: torch.dtype, lead: tuple[int, ...], with_bias: bool) -> None:
    x = torch.randn(*lead, 24).to(dtype)
    w = torch.randn(20, 24).to(dtype)
    b = torch.randn(20).to(dtype) if with_bias else None
    want = F.linear(x.double(), w.double(), None if b is None else b.double()).to(dtype)
    close(ops.linear(x, w, b), want, dtype)
    close(torch.ops.theodolite.linear(x, w, b), want, dtype)


@pytest.mark.parametrize("layout", ["nn", "nt", "tn", "tt"])
def test_mm_every_layout(layout: str) -> None:
    a = torch.randn(12, 20) if layout[0] == "n" else torch.randn(20, 12).t()
    b = torch.randn(20, 9) if layout[1] == "n" else torch.randn(9, 20).t()
    close(ops.mm(a, b), (a.double() @ b.double()).float(), torch.float32)


def test_strided_input_without_a_unit_stride_is_copied_not_refused() -> None:
    x = torch.randn(8, 48)[:, ::2]  # strides (48, 2): neither dimension contiguous
    w = torch.randn(16, 24)
    close(ops.linear(x, w), F.linear(x, w), torch.float32)


def test_opcheck_linear_and_mm() -> None:
    x = torch.randn(8, 32, requires_grad=True)
    w = torch.randn(16, 32, requires_grad=True)
    b = torch.randn(16, requires_grad=True)
    torch.library.opcheck(torch.ops.theodolite.linear.default, (x, w, b))
    torch.library.opcheck(torch.ops.theodolite.linear.default, (x.detach(), w.detach(), None))
    a = torch.randn(8, 32, requires_grad=True)
    bt = torch.randn(16, 32).t().requires_grad_()
    torch.library.opcheck(torch.ops.theodolite.mm.default, (a, bt))


def test_a_repeated_shape_selects_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = api.select_problem

    def counting(problem, profile=None):  # type: ignore[no-untyped-def]
        calls.append(problem)
        return real(problem, profile)

    monkeypatch.setattr(api, "select_problem", counting)
    x, w = torch.randn(8, 32), torch.randn(16, 32)
    for _ in range(3):
        ops.linear(x, w)
    ops.linear(torch.randn(8, 32), w)  # another tensor of the same metadata: the same runner
    assert len(calls) == 1 and calls[0].layout == "nt"
    ops.linear(torch.randn(9, 32), w)
    assert len(calls) == 2


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_mlp_gradients_match_torch(dtype: torch.dtype) -> None:
    from theodolite import nn as tnn

    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(24, 40), torch.nn.SiLU(), torch.nn.Linear(40, 16, bias=False)).to(dtype)
    ref = torch.nn.Sequential(torch.nn.Linear(24, 40), torch.nn.SiLU(), torch.nn.Linear(40, 16, bias=False)).double()
    ref.load_state_dict(mlp.state_dict())
    assert tnn.patch(mlp) == ["0", "2"]
    x = torch.randn(2, 6, 24).to(dtype).requires_grad_()
    xr = x.detach().double().requires_grad_()
    mlp(x).square().sum().backward()
    ref(xr).square().sum().backward()
    close(x.grad, xr.grad.to(dtype), dtype)  # type: ignore[union-attr, arg-type]
    for (name, p), (_, pr) in zip(mlp.named_parameters(), ref.named_parameters(), strict=True):
        assert p.grad is not None, name
        close(p.grad, pr.grad.to(dtype), dtype)  # type: ignore[union-attr]


@pytest.mark.parametrize("entry", ["eager", "operator"])
def test_linear_gradients_of_both_entries(entry: str) -> None:
    fn = ops.linear if entry == "eager" else ops.linear_op
    x = torch.randn(2, 5, 24, requires_grad=True)
    w = torch.randn(16, 24, requires_grad=True)
    b = torch.randn(16, requires_grad=True)
    g = torch.randn(2, 5, 16)
    got = torch.autograd.grad((fn(x, w, b) * g).sum(), (x, w, b))
    want = torch.autograd.grad((F.linear(x, w, b) * g).sum(), (x, w, b))
    for gg, ww in zip(got, want, strict=True):
        close(gg, ww, torch.float32)


def test_backward_runs_the_kernels_in_nn_and_tn(monkeypatch: pytest.MonkeyPatch) -> None:
    from theodolite.kernels import launch

    seen = []
    real = launch.problem_of

    def recording(a, b, *args, **kwargs):  # type: ignore[no-untyped-def]
        problem = real(a, b, *args, **kwargs)
        seen.append((problem.m, problem.n, problem.k, problem.layout))
        return problem

    monkeypatch.setattr(launch, "problem_of", recording)
    x = torch.randn(8, 24, requires_grad=True)
    w = torch.randn(16, 24, requires_grad=True)
    (ops.linear(x, w) * torch.randn(8, 16)).sum().backward()  # dY contiguous (a sum's own grad is an expand)
    assert (8, 16, 24, "nt") in seen  # forward: X @ W.T
    assert (8, 24, 16, "nn") in seen  # dX = dY @ W
    assert (16, 24, 8, "tn") in seen  # dW = dY.T @ X (a transposed view, no copy)


def test_unsupported_dtype_falls_back_with_one_warning() -> None:
    x, w = torch.randn(4, 8, dtype=torch.float64), torch.randn(6, 8, dtype=torch.float64)
    with pytest.warns(FallbackWarning, match="float64"):
        out = ops.linear(x, w)
    assert torch.equal(out, F.linear(x, w))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = ops.linear(torch.randn(5, 8, dtype=torch.float64), w)  # a new shape: still no second warning
    assert again.shape == (5, 6)


def test_cpu_without_the_interpreter_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ops, "_interpreting", lambda: False)
    lin = torch.nn.Linear(8, 6)
    from theodolite import nn as tnn

    tnn.patch(lin)
    x = torch.randn(3, 8)
    with pytest.warns(FallbackWarning, match="CUDA"):
        out = lin(x)
    assert torch.equal(out, F.linear(x, lin.weight, lin.bias))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lin(x)


def test_mismatched_inputs_get_torchs_error_not_a_triton_trace() -> None:
    with pytest.raises(RuntimeError, match="shape|size"):
        ops.linear(torch.randn(4, 8), torch.randn(6, 9))
    with pytest.raises(RuntimeError, match="dtype|type"):
        ops.linear(torch.randn(4, 8), torch.randn(6, 8, dtype=torch.float16))


def _torch_frames(fn: object) -> list[str]:
    """The Python functions of torch's own package that run during ``fn()`` (file:function)."""
    import sys

    root = os.path.dirname(torch.__file__)
    seen: list[str] = []

    def tracer(frame, event, arg):  # type: ignore[no-untyped-def]
        if event == "call" and frame.f_code.co_filename.startswith(root):
            seen.append(f"{os.path.relpath(frame.f_code.co_filename, root)}:{frame.f_code.co_name}")

    sys.setprofile(tracer)
    try:
        fn()  # type: ignore[operator]
    finally:
        sys.setprofile(None)
    return seen


def test_operator_calls_the_runner_with_no_python_layer_of_torch_between(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a compiled graph pays per call: the dispatcher calls the autograd kernel, which calls the cached runner
    (no custom_op autograd wrapper, Python redispatch, aliasing check or dynamo-disable context in between)."""
    calls = []

    def runner_stub(cache, make, a, b, bias):  # type: ignore[no-untyped-def]
        calls.append((a.shape, b.shape))
        return torch.empty(a.shape[0], b.shape[0] if cache is ops._LINEAR else b.shape[1])

    monkeypatch.setattr(ops, "_cached", runner_stub)
    x, w, a, b = torch.randn(8, 32), torch.randn(16, 32), torch.randn(8, 32), torch.randn(32, 16)
    frames = _torch_frames(lambda: (ops.linear_op(x, w, None), ops.mm_op(a, b)))
    assert calls == [((8, 32), (16, 32)), ((8, 32), (32, 16))]
    assert set(frames) <= {"_ops.py:__call__"}, frames
    with torch.no_grad():  # a weight that requires grad, grad mode off: the same direct call
        frames = _torch_frames(lambda: ops.linear_op(x, w.requires_grad_(), None))
    assert len(calls) == 3 and set(frames) <= {"_ops.py:__call__"}, frames


def test_operator_redispatches_where_the_dispatcher_is_needed() -> None:
    """A negative view (its sign lives in a dispatch key) and fake tensors take the dispatcher's way, not the
    direct call: the value is right and a fake tensor gets a fake result."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    x, w = torch.randn(8, 32), torch.randn(16, 32)
    neg = torch._neg_view(x)
    close(ops.linear_op(neg, w, None), F.linear(-x, w), torch.float32)
    close(ops.mm_op(neg, w.t()), -x @ w.t(), torch.float32)
    with FakeTensorMode() as mode:
        fx, fw = mode.from_tensor(x), mode.from_tensor(w)
        out = ops.linear_op(fx, fw, None)
    assert type(out).__name__ == "FakeTensor" and out.shape == (8, 16)


def test_an_eager_call_under_a_compiling_frame_is_not_traced() -> None:
    """At a graph break the dispatcher runs the kernels under dynamo's frame hook: dynamo must leave them (and the
    profile loading and launch code they call) alone, as custom_op's dynamo-disable wrapper did."""
    from torch._dynamo.decorators import skip
    from torch._dynamo.testing import CompileCounter

    torch._dynamo.reset()
    w = torch.randn(16, 32)

    @skip
    def eager_part(x: torch.Tensor) -> torch.Tensor:
        return ops.linear_op(x, w, None)  # type: ignore[no-any-return]

    counter = CompileCounter()

    @torch.compile(backend=counter)
    def f(x: torch.Tensor) -> torch.Tensor:
        return eager_part(x * 2) + 1

    x = torch.randn(8, 32)
    with torch.no_grad():
        for _ in range(2):
            close(f(x), F.linear(2 * x, w) + 1, torch.float32)
    assert counter.frame_count == 2  # the two halves of f around the break, nothing of theodolite's


def _count(monkeypatch: pytest.MonkeyPatch, module: object, name: str) -> list[object]:
    """Record each call of ``module.name`` (its first argument) while the test runs."""
    calls: list[object] = []
    real = getattr(module, name)

    def counting(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counting)
    return calls


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_a_repeated_forward_and_backward_resolves_nothing_new(monkeypatch: pytest.MonkeyPatch,
                                                              dtype: torch.dtype) -> None:  # fmt: skip
    """The second step of a training loop (same shapes, new tensors) selects no config and makes no runner, forward
    or backward, and its gradients are torch's; the forward's runner is the one a call without a gradient made."""
    selections = _count(monkeypatch, api, "select_problem")
    made = [_count(monkeypatch, ops, "_linear_runner"), _count(monkeypatch, ops, "_mm_runner")]
    with torch.no_grad():
        ops.linear(torch.randn(2, 5, 24).to(dtype), torch.randn(16, 24).to(dtype), torch.randn(16).to(dtype))
    assert (len(selections), len(made[0])) == (1, 1)
    for step in range(2):
        x = torch.randn(2, 5, 24).to(dtype).requires_grad_()
        w = torch.randn(16, 24).to(dtype).requires_grad_()
        b = torch.randn(16).to(dtype).requires_grad_()
        g = torch.randn(2, 5, 16).to(dtype)
        got = torch.autograd.grad(ops.linear(x, w, b), (x, w, b), g)
        xd, wd, bd = (t.detach().double().requires_grad_() for t in (x, w, b))
        want = torch.autograd.grad(F.linear(xd, wd, bd), (xd, wd, bd), g.double())
        for gg, ww in zip(got, want, strict=True):
            close(gg, ww.to(dtype), dtype)
        if step == 0:
            layouts = sorted(p.layout for p in selections)  # type: ignore[attr-defined]
            assert layouts == ["nn", "nt", "tn"], layouts  # forward X @ W.T, dX = dY @ W, dW = dY.T @ X
            first = (len(selections), [len(m) for m in made])
    assert (len(selections), [len(m) for m in made]) == first == (3, [1, 2])


def test_backward_saves_only_what_it_reads() -> None:
    """W alone when only X needs a gradient, X alone when only W does: no tensor kept alive for nothing."""
    x, w = torch.randn(8, 24), torch.randn(16, 24)
    for entry in (ops.linear, ops.linear_op):
        only_x = entry(x.requires_grad_(), w.detach(), None)
        x_saved, w_saved = only_x.grad_fn.saved_tensors  # type: ignore[union-attr]
        assert x_saved is None and w_saved is not None and w_saved.data_ptr() == w.data_ptr()
        only_w = entry(x.detach(), w.requires_grad_(), None)
        x_saved, w_saved = only_w.grad_fn.saved_tensors  # type: ignore[union-attr]
        assert w_saved is None and x_saved is not None and x_saved.data_ptr() == x.data_ptr()
        x.requires_grad_(False)
        w.requires_grad_(False)


def test_a_repeated_step_plans_nothing_on_the_launch_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPU's host path on the CPU (launch cache on, each kernel launch a no-op, as in
    experiments/linear_host_path.py): the first forward and backward plan three GEMMs (X @ W.T, dY @ W, dY.T @ X),
    a second one of the same metadata plans none and selects nothing."""
    from theodolite.kernels import launch

    def compile_stub(self):  # type: ignore[no-untyped-def]
        self.ordered = [*self.args, *self.kwargs.values()]
        self.runner = lambda *args: None
        return True

    monkeypatch.setattr(launch._Launch, "compile", compile_stub)
    monkeypatch.setattr(launch, "fast_launch_enabled", lambda: True)
    monkeypatch.setattr(launch, "_FAST", {})  # its no-op entries leave with the test
    plans = _count(monkeypatch, launch, "plan_gemm")
    selections = _count(monkeypatch, api, "select_problem")
    x = torch.randn(8, 24, requires_grad=True)
    w = torch.randn(16, 24, requires_grad=True)
    g = torch.randn(8, 16)
    torch.autograd.grad(ops.linear(x, w), (x, w), g)
    assert (len(plans), len(selections)) == (3, 3)
    for _ in range(2):
        x = torch.randn(8, 24, requires_grad=True)
        dx, dw = torch.autograd.grad(ops.linear(x, w), (x, w), g)
        assert dx.shape == x.shape and dw.shape == w.shape
    assert (len(plans), len(selections)) == (3, 3)


@pytest.mark.parametrize("lead", [(8,), (2, 4)])
@pytest.mark.parametrize("with_bias", [False, True])
def test_a_repeated_linear_hands_the_runner_the_weight_itself(
    interpreted_launch_cache: None, monkeypatch: pytest.MonkeyPatch, lead: tuple[int, ...], with_bias: bool
) -> None:
    """The launch cache on in the interpreter (each launch run there): once a linear's runner is cached and reads W by
    its address alone, a repeat hands it W itself, no ``W.t()`` view; new data and new weights of the same metadata
    still give F.linear's numbers."""
    ops.linear(torch.randn(*lead, 24), torch.randn(40, 24), torch.randn(40) if with_bias else None)
    views = _count(monkeypatch, torch.Tensor, "t")
    for seed in range(3):
        gen = torch.Generator().manual_seed(seed)
        x, w = torch.randn(*lead, 24, generator=gen), torch.randn(40, 24, generator=gen)
        bias = torch.randn(40, generator=gen) if with_bias else None
        close(ops.linear(x, w, bias), F.linear(x, w, bias), torch.float32)
    assert views == []
    (entry,) = ops._LINEAR.values()
    assert entry.gemm.fast_w is not None  # type: ignore[attr-defined]


def _pick(m: int, n: int, k: int, dtype: torch.dtype) -> str:
    return api.select(m, n, k, dtype="fp32" if dtype is torch.float32 else "fp16", layout="nt").config.key


@pytest.mark.parametrize(
    ("lead", "n", "k", "dtype", "variant"),
    [((1,), 20, 24, torch.float16, "persistent"), ((1,), 20, 256, torch.float32, "splitk"),
     ((2, 3), 20, 24, torch.float32, "persistent")],
)  # fmt: skip
@pytest.mark.parametrize("with_bias", [True, False])
def test_traced_body_matches_torch(
    lead: tuple[int, ...], n: int, k: int, dtype: torch.dtype, variant: str, with_bias: bool
) -> None:
    x = torch.randn(*lead, k).to(dtype)
    w = torch.randn(n, k).to(dtype)
    b = torch.randn(n).to(dtype) if with_bias else None
    rows = x.numel() // k
    assert _pick(rows, n, k, dtype).startswith(variant + "/")  # the shapes cover the variants they name
    recipe = traced_ops.recipe_for(x.reshape(-1, k), w, b)
    assert recipe is not None and recipe.config_key == _pick(rows, n, k, dtype)
    want = F.linear(x.double(), w.double(), None if b is None else b.double()).to(dtype)
    close(traced_ops.linear_traced(x, w, b), want, dtype)
    close(torch.ops.theodolite.linear_traced(x, w, b), want, dtype)


def test_split_k_recipe_allocates_its_own_exact_scratch() -> None:
    """A split-K pick's workspace and counters become per-call buffers of the plan's exact size (zeroed counters, an
    uninitialised fp32 workspace), and planning leaves the device's cached buffers as they were."""
    big = buffers._workspace(torch.device("cpu"), 1 << 16)
    x, w = torch.randn(1, 256), torch.randn(20, 256)
    recipe = traced_ops.recipe_for(x, w, None)
    assert recipe is not None
    config = GemmConfig.from_key(recipe.config_key)
    assert config.variant == "splitk"
    scratch = [s for s in recipe.sources if isinstance(s, traced_ops.Scratch)]
    tiles = -(-1 // config.block_m) * -(-20 // config.tile_n)
    assert sorted((s.dtype is torch.int32, s.numel, s.zeroed) for s in scratch) == [
        (False, config.split_k * tiles * config.block_m * config.block_n, False),
        (True, 1024, True),
    ]
    assert buffers._workspace(torch.device("cpu"), 1) is big  # the cache kept its buffer


def test_fake_arguments_give_the_real_ones_recipe() -> None:
    """Traced, the arguments are fake tensors: the recipe is planned on stand-ins and equals the real arguments'."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    x, w, b = torch.randn(3, 256), torch.randn(20, 256), torch.randn(20)
    real = traced_ops.make_recipe(x, w, b)
    mode = FakeTensorMode()
    fake = traced_ops.make_recipe(mode.from_tensor(x), mode.from_tensor(w), mode.from_tensor(b))
    assert real is not None and fake is not None
    assert (fake.config_key, fake.grid, fake.sources) == (real.config_key, real.grid, real.sources)
    assert fake.kwargs == real.kwargs


def test_without_a_recipe_the_opaque_operator_runs() -> None:
    """A view whose first element is off a 16-byte boundary, or sizes that are not plain ints (dynamic shapes), have
    no recipe: the body runs theodolite::linear instead, with the same result."""
    base = torch.randn(2 * 24 + 1).to(torch.float16)
    x = base[1:].view(2, 24)  # 2-byte offset
    w = torch.randn(20, 24).to(torch.float16)
    assert traced_ops.recipe_for(x, w, None) is None
    close(traced_ops.linear_traced(x, w, None), F.linear(x.double(), w.double()).to(torch.float16), torch.float16)
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    rows = ShapeEnv().create_unbacked_symint()
    symbolic = types.SimpleNamespace(shape=(rows, 24), stride=lambda: (24, 1), dtype=torch.float16)
    assert traced_ops.recipe_key(symbolic, w, None) is None  # type: ignore[arg-type]


def test_compiling_routes_to_the_traced_operator_only_when_enabled_and_no_gradient(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    monkeypatch.setattr(ops._traced, "linear_traced_op", lambda *a: calls.append("traced"))
    monkeypatch.setattr(ops, "linear_op", lambda *a: calls.append("opaque"))
    x, w = torch.randn(2, 24), torch.randn(20, 24)
    monkeypatch.setattr(ops._traced, "ENABLED", False)
    ops.linear(x, w)
    monkeypatch.setattr(ops._traced, "ENABLED", True)
    ops.linear(x, w)
    ops.linear(x, w.requires_grad_())  # a gradient to record: the operator with autograd
    with torch.no_grad():
        ops.linear(x, w)
    assert calls == ["opaque", "traced", "opaque", "traced"]
