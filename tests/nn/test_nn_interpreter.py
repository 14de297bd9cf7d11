"""CPU tests of theodolite.nn in Triton's interpreter: Linear as a drop-in, patch/unpatch round trips, a patched decoder
decoding the same greedy tokens as torch, and torch.compile(fullgraph=True) without graph breaks or per-shape
recompiles."""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")
if torch.cuda.is_available():
    pytest.skip("interpreter tests run on CPU-only machines", allow_module_level=True)
os.environ["TRITON_INTERPRET"] = "1"  # before the kernels are imported: @triton.jit reads it then

import re  # noqa: E402

import torch.nn.functional as F  # noqa: E402

import theodolite  # noqa: E402
from theodolite import ops  # noqa: E402
from theodolite.nn import Linear, patch, unpatch  # noqa: E402


def snapshot(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in model.state_dict().items()}


def test_linear_is_a_drop_in() -> None:
    torch.manual_seed(0)
    lin = Linear(24, 16)
    ref = torch.nn.Linear(24, 16)
    assert isinstance(lin, torch.nn.Linear)
    assert list(lin.state_dict()) == list(ref.state_dict()) == ["weight", "bias"]
    ref.load_state_dict(lin.state_dict())
    x = torch.randn(3, 5, 24)
    torch.testing.assert_close(lin(x), ref(x), rtol=1e-5, atol=1e-5)
    half = Linear(24, 16, bias=False, dtype=torch.float16, device="cpu")
    assert half.weight.dtype == torch.float16 and half.bias is None
    assert "in_features=24, out_features=16" in repr(half)


def test_from_linear_shares_the_parameters() -> None:
    ref = torch.nn.Linear(8, 4)
    lin = Linear.from_linear(ref)
    assert lin.weight is ref.weight and lin.bias is ref.bias and type(ref) is torch.nn.Linear
    x = torch.randn(2, 8)
    torch.testing.assert_close(lin(x), ref(x), rtol=1e-5, atol=1e-5)
    with pytest.raises(TypeError, match="torch.nn.Linear"):
        Linear.from_linear(torch.nn.Conv1d(1, 1, 1))  # type: ignore[arg-type]


def test_patch_unpatch_round_trip_keeps_the_state_dict(decoder) -> None:  # type: ignore[no-untyped-def]
    torch.manual_seed(0)
    model = decoder()
    before = snapshot(model)
    params = {name: p for name, p in model.named_parameters()}
    names = theodolite.patch(model)
    assert names == ["layers.0.qkv", "layers.0.o", "layers.0.gate_up", "layers.0.down",
                     "layers.1.qkv", "layers.1.o", "layers.1.gate_up", "layers.1.down", "head"]  # fmt: skip
    assert all(type(model.get_submodule(n)) is Linear for n in names)
    after = model.state_dict()
    assert list(after) == list(before)
    assert all(torch.equal(after[k], before[k]) for k in before)
    assert all(p is params[name] for name, p in model.named_parameters())  # the same Parameters: optimizers keep them
    assert sorted(theodolite.unpatch(model)) == sorted(names)
    assert all(type(model.get_submodule(n)) is torch.nn.Linear for n in names)
    restored = model.state_dict()
    assert list(restored) == list(before) and all(torch.equal(restored[k], before[k]) for k in before)


def test_patch_filters_by_name_and_dtype(decoder) -> None:  # type: ignore[no-untyped-def]
    model = decoder()
    assert patch(model, names=r"\.(qkv|o)$") == ["layers.0.qkv", "layers.0.o", "layers.1.qkv", "layers.1.o"]
    assert unpatch(model, names=re.compile("layers.1")) == ["layers.1.qkv", "layers.1.o"]
    assert patch(model, names=lambda n: n == "head") == ["head"]
    model.layers[0].down.half()
    assert patch(model, dtypes=[torch.float16]) == ["layers.0.down"]
    assert patch(model, dtypes=[torch.bfloat16]) == []
    mha = torch.nn.MultiheadAttention(8, 2)
    assert patch(mha) == []  # its out_proj is a Linear subclass torch calls by weight: left alone


def test_patched_decoder_decodes_the_same_greedy_tokens(decoder) -> None:  # type: ignore[no-untyped-def]
    torch.manual_seed(0)
    model = decoder().eval()
    prompt = torch.randint(0, 97, (1, 5))
    want = model.greedy(prompt, 4)
    logits = model(prompt)
    patch(model)
    torch.testing.assert_close(model(prompt), logits, rtol=1e-4, atol=1e-4)
    assert torch.equal(model.greedy(prompt, 4), want)


def test_torch_compile_fullgraph_no_break_no_per_shape_recompile(decoder) -> None:  # type: ignore[no-untyped-def]
    from torch._dynamo.testing import CompileCounterWithBackend

    torch._dynamo.reset()
    torch.manual_seed(0)
    model = decoder(layers=1).eval()
    refs = {s: model(torch.randint(0, 97, (2, s), generator=torch.Generator().manual_seed(s))) for s in (3, 4, 6)}
    patch(model)
    explained = torch._dynamo.explain(model)(torch.randint(0, 97, (2, 3)))
    assert explained.graph_break_count == 0 and explained.graph_count == 1
    assert any("theodolite.linear" in str(node.target) for g in explained.graphs for node in g.graph.nodes)
    torch._dynamo.reset()
    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(model, backend=counter, fullgraph=True)
    with torch.no_grad():
        for s, ref in refs.items():
            out = compiled(torch.randint(0, 97, (2, s), generator=torch.Generator().manual_seed(s)))
            torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)
    # the first length compiles static, the second marks it dynamic; every length after reuses that graph
    assert counter.frame_count == 2


def test_compiled_training_step_matches_eager_gradients() -> None:
    torch._dynamo.reset()
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 8))
    ref = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 8))
    ref.load_state_dict(mlp.state_dict())
    patch(mlp)
    compiled = torch.compile(mlp, backend="aot_eager", fullgraph=True)
    x = torch.randn(5, 16)
    compiled(x).square().sum().backward()
    ref(x).square().sum().backward()
    for p, pr in zip(mlp.parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(p.grad, pr.grad, rtol=1e-4, atol=1e-4)


def test_autocast_casts_as_f_linear_does() -> None:
    ops.clear_caches()
    lin = Linear(8, 4)
    x = torch.randn(3, 8)
    with torch.autocast("cpu", dtype=torch.float16):
        want = F.linear(x, lin.weight, lin.bias)
        got = lin(x)
    assert got.dtype == want.dtype == torch.float16
    torch.testing.assert_close(got, want, rtol=2e-2, atol=2e-2)


def test_transformers_llama_generate_through_patch() -> None:
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=2, max_position_embeddings=64,
    )  # fmt: skip
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()
    prompt = torch.randint(0, 64, (1, 4))
    kwargs = dict(max_new_tokens=3, do_sample=False, pad_token_id=0)
    want = model.generate(prompt, **kwargs)
    assert len(patch(model)) == 8  # q, k, v, o, gate, up, down, lm_head
    assert torch.equal(model.generate(prompt, **kwargs), want)
