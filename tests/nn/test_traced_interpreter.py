"""CPU tests of theodolite::linear_traced (the compiled path's traced operator) in Triton's interpreter: its eager body
against torch, the recipe a pick becomes (scratch buffers of exact size, the device cache untouched), the same recipe
from fake tensors, the opaque operator where no recipe applies, and ops.linear's routing under compile."""

from __future__ import annotations

import os
import types

import pytest

torch = pytest.importorskip("torch")
if torch.cuda.is_available():
    pytest.skip("interpreter tests run on CPU-only machines", allow_module_level=True)
os.environ["TRITON_INTERPRET"] = "1"  # before the kernels are imported: @triton.jit reads it then

import torch.nn.functional as F  # noqa: E402
from theodolite.kernels import buffers  # noqa: E402
from theodolite.kernels.config import GemmConfig  # noqa: E402

from theodolite import api, ops, traced_ops  # noqa: E402

TOL = {torch.float32: 1e-5, torch.float16: 2e-2}


def close(got: torch.Tensor, want: torch.Tensor, dtype: torch.dtype) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype
    scale = max(want.double().abs().max().item(), 1e-6)
    err = (got.double() - want.double()).abs().max().item() / scale
    assert err <= TOL[dtype], f"max rel error {err}"


@pytest.fixture(autouse=True)
def _fresh() -> None:
    ops.clear_caches()


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
