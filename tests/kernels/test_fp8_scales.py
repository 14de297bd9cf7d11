"""fp8 per-tensor scales on the CPU (Triton's interpreter runs fp8 dots): every form of scale gives the scaled
product, and a repeated scaled call takes gemm()'s launch cache (no new plan) with each call's scale values.

The launch cache is off in the interpreter (no compiled kernel to launch directly); ``cached_launches`` turns it on
with each launch run through the interpreter from the arguments the cache re-binds, so what a GPU's direct launch
would receive is what runs here.
"""

from __future__ import annotations

import inspect
import os
from typing import Any

import pytest

torch = pytest.importorskip("torch")
if torch.cuda.is_available():
    pytest.skip("interpreter tests run on CPU-only machines", allow_module_level=True)
os.environ["TRITON_INTERPRET"] = "1"  # before the kernels are imported: @triton.jit reads it then

from theodolite.kernels import ConfigError, GemmConfig, gemm, launch  # noqa: E402

FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)
CONFIGS = {
    "persistent": GemmConfig("persistent", 16, 16, 32, 2, 4, 2),
    "tma": GemmConfig("tma", 16, 16, 32, 2, 4, 2),
    "streamk": GemmConfig("streamk", 16, 16, 32, 2, 4, 2),
    "splitk": GemmConfig("splitk", 16, 16, 32, 2, 4, 2, split_k=3),
}


def fp8_pair(m: int, n: int, k: int, dtype: torch.dtype, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A [M, K] and B = w.t() of an [N, K] weight (layout nt, K-major B as torch._scaled_mm takes it)."""
    gen = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=gen).to(dtype)
    w = torch.randn(n, k, generator=gen).to(dtype)
    return a, w.t()


def rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    return float((out.double() - ref).abs().max() / ref.abs().max().clamp_min(1e-30))


def value(scale: Any) -> float:
    return float(scale.double().item()) if isinstance(scale, torch.Tensor) else (1.0 if scale is None else scale)


SCALES = {
    "two tensors": (torch.tensor(0.5), torch.tensor([3.0])),
    "tensor and float": (torch.tensor(0.25), 4.0),
    "float and tensor": (1.5, torch.tensor(2.0)),
    "floats": (0.5, 0.125),
    "b only, float64": (None, torch.tensor([2.5], dtype=torch.float64)),
    "a only, bfloat16": (torch.tensor(0.75, dtype=torch.bfloat16), None),
}


@pytest.mark.parametrize("variant", sorted(CONFIGS))
@pytest.mark.parametrize("dtype", FP8, ids=["e4m3", "e5m2"])
def test_every_scale_form_scales_the_product(variant: str, dtype: torch.dtype) -> None:
    a, b = fp8_pair(40, 48, 96, dtype, seed=1)
    exact = a.double() @ b.double()
    for name, (sa, sb) in SCALES.items():
        out = gemm(a, b, CONFIGS[variant], a_scale=sa, b_scale=sb, out_dtype=torch.float32, alpha=2.0, num_sms=3)
        assert rel_error(out, exact * 2.0 * value(sa) * value(sb)) <= 1e-5, (variant, name)
    out = gemm(a, b, CONFIGS[variant], a_scale=torch.tensor(0.5), out_dtype=torch.bfloat16, num_sms=3)
    assert out.dtype == torch.bfloat16 and rel_error(out, exact * 0.5) <= 1e-2


@pytest.fixture
def cached_launches(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """gemm()'s launch cache on in the interpreter; returns a one-element list counting plan_gemm calls."""

    def compile_through_interpreter(self: Any) -> bool:
        signature = inspect.signature(self.kernel.fn)
        kwargs = {key: value for key, value in self.kwargs.items() if key in signature.parameters}
        bound = signature.bind(*self.args, **kwargs)
        bound.apply_defaults()
        self.ordered = list(bound.arguments.values())
        kernel, grid = self.kernel, self.grid
        self.runner = lambda *args: kernel[grid](*args)
        self.runner(*self.ordered)
        return True

    plans = [0]
    plan_gemm = launch.plan_gemm

    def counted(*args: Any, **kwargs: Any) -> Any:
        plans[0] += 1
        return plan_gemm(*args, **kwargs)

    monkeypatch.setattr(launch._Launch, "compile", compile_through_interpreter)
    monkeypatch.setattr(launch, "fast_launch_enabled", lambda: True)
    monkeypatch.setattr(launch, "plan_gemm", counted)
    launch._FAST.clear()
    yield plans
    launch._FAST.clear()


@pytest.mark.parametrize("variant", sorted(CONFIGS))
def test_a_repeated_scaled_call_takes_the_launch_cache(cached_launches: list[int], variant: str) -> None:
    config = CONFIGS[variant]
    a, b = fp8_pair(40, 48, 96, torch.float8_e4m3fn, seed=2)
    sa, sb = torch.tensor(0.5), torch.tensor(3.0)
    first = gemm(a, b, config, a_scale=sa, b_scale=sb, num_sms=3, out_dtype=torch.float32)
    assert cached_launches[0] == 1 and len(launch._FAST) == 1
    assert rel_error(first, a.double() @ b.double() * 1.5) <= 1e-5
    # new data, new scale tensors, a scale updated in place: each read anew, no new plan
    a2, b2 = fp8_pair(40, 48, 96, torch.float8_e4m3fn, seed=3)
    for sa2, sb2 in ((torch.tensor(2.0), torch.tensor(0.25)), (sa, sb)):
        out = gemm(a2, b2, config, a_scale=sa2, b_scale=sb2, num_sms=3, out_dtype=torch.float32)
        assert rel_error(out, a2.double() @ b2.double() * value(sa2) * value(sb2)) <= 1e-5
        sa.fill_(4.0)
    assert cached_launches[0] == 1 and len(launch._FAST) == 1
    # scales as numbers: folded into alpha, cached per value; a lone tensor scale is passed as it is
    for sa3, sb3 in ((0.5, 2.0), (0.5, 2.0), (sa, None), (sa, None)):
        out = gemm(a2, b2, config, a_scale=sa3, b_scale=sb3, num_sms=3, out_dtype=torch.float32)
        assert rel_error(out, a2.double() @ b2.double() * value(sa3) * value(sb3)) <= 1e-5
    assert cached_launches[0] == 3 and len(launch._FAST) == 3


def test_the_launch_cache_key_tells_scales_apart() -> None:
    config = CONFIGS["persistent"]
    a, b = fp8_pair(40, 48, 96, torch.float8_e4m3fn, seed=4)

    def key(sa: Any, sb: Any) -> Any:
        return launch._fast_key(a, b, config, None, 1.0, 0.0, None, None, None, None, sa, sb, None)

    one, two = torch.tensor(1.0), torch.tensor([2.0])
    assert key(one, two) == key(torch.tensor(5.0), torch.tensor([6.0]))  # values are not in the key
    keys = [key(None, None), key(one, None), key(None, one), key(one, two), key(one, 2.0), key(one, 3.0),
            key(one.double(), two), key(one, two.reshape(())), key(2.0, None)]  # fmt: skip
    assert len(set(keys)) == len(keys)
    offset = torch.zeros(2)[1:]  # an address 4 bytes past 16-byte alignment: another pointer specialization
    assert key(offset, None) != key(torch.zeros(1), None)
    assert key("2", None) is None and key(True, None) is None  # the full path names the error


def test_bad_scales_are_named_before_any_launch(cached_launches: list[int]) -> None:
    a, b = fp8_pair(16, 16, 32, torch.float8_e4m3fn, seed=5)
    config = CONFIGS["persistent"]
    for sa, match in ((torch.ones(2), "per-tensor"), (torch.ones(1, dtype=torch.int32), "floating-point"),
                      ("2", "float or a one-element tensor"), (True, "float or a one-element tensor")):  # fmt: skip
        with pytest.raises(ConfigError, match=match):
            gemm(a, b, config, a_scale=sa)
    x = torch.randn(16, 32)
    with pytest.raises(ConfigError, match="fp8 inputs only"):
        gemm(x, x.t(), config, a_scale=2.0, precision="ieee")


def test_the_e5m2_baseline_is_the_mixed_call_torch_accepts() -> None:
    """torch._scaled_mm refuses e5m2 x e5m2 on CUDA: the baseline converts B to e4m3 (clamped, strides kept)."""
    from theodolite.kernels.benchmark import scaled_mm_operand

    a, b = fp8_pair(32, 48, 64, torch.float8_e5m2, seed=6)
    b = (b.float() * 400).to(torch.float8_e5m2)  # past e4m3's range (448) in places: clamped, not NaN
    mixed = scaled_mm_operand(a, b)
    assert mixed.dtype == torch.float8_e4m3fn and mixed.stride() == b.stride()
    limit = torch.finfo(torch.float8_e4m3fn).max
    assert torch.isfinite(mixed.float()).all() and mixed.float().abs().max() == limit
    inside = b.float().abs() < 200
    assert torch.allclose(mixed.float()[inside], b.float()[inside], rtol=0.07)  # e4m3's rounding of e5m2 values
    e4m3 = a.to(torch.float8_e4m3fn)
    assert scaled_mm_operand(e4m3, b) is b and scaled_mm_operand(a, mixed) is mixed


def test_a_repeated_matmul_takes_its_own_runner(cached_launches: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    """theodolite.matmul keeps the launch cache's runner of a call with no out, c or bias: a repeat with the same
    metadata (new data, new scale tensors, a scale updated in place) runs it without gemm(); a number scale's value,
    alpha or an ``out`` make another call (gemm again)."""
    from pathlib import Path

    from theodolite import api
    from theodolite.profile import load_profile

    profile = load_profile(Path(__file__).resolve().parents[2] / "profiles" / "nvidia-h200.h5")
    calls = [0]
    gemm_ = launch.gemm

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return gemm_(*args, **kwargs)

    monkeypatch.setattr(launch, "gemm", counted)
    api.clear_caches()
    a, b = fp8_pair(24, 40, 64, torch.float8_e4m3fn, seed=7)
    sa, sb = torch.tensor(0.5), torch.tensor(3.0)
    first = api.matmul(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.float32, profile=profile)
    assert calls[0] == 1 and cached_launches[0] == 1
    assert rel_error(first, a.double() @ b.double() * 1.5) <= 1e-5
    a2, b2 = fp8_pair(24, 40, 64, torch.float8_e4m3fn, seed=8)
    for sa2, sb2 in ((torch.tensor(2.0), torch.tensor(0.25)), (sa, sb)):
        out = api.matmul(a2, b2, scale_a=sa2, scale_b=sb2, out_dtype=torch.float32, profile=profile)
        assert rel_error(out, a2.double() @ b2.double() * value(sa2) * value(sb2)) <= 1e-5
        sa.fill_(4.0)
    assert calls[0] == 1 and cached_launches[0] == 1
    for kwargs, factor in (({"scale_a": 2.0}, 2.0), ({"scale_a": 2.0}, 2.0), ({"scale_a": 0.5}, 0.5),
                           ({"alpha": 3.0}, 3.0), ({"alpha": 3.0}, 3.0)):  # fmt: skip
        out = api.matmul(a2, b2, out_dtype=torch.float32, profile=profile, **kwargs)
        assert rel_error(out, a2.double() @ b2.double() * factor) <= 1e-5, kwargs
    assert calls[0] == 4  # one each for the scale 2.0, the scale 0.5 and alpha 3.0: their repeats took the runner
    target = torch.empty(24, 40)
    for _ in range(2):
        api.matmul(a2, b2, out=target, profile=profile)
    assert calls[0] == 6 and rel_error(target, a2.double() @ b2.double()) <= 1e-5  # out= always takes gemm()
    api.clear_caches()


@pytest.mark.parametrize("variant", sorted(CONFIGS))
def test_two_scale_tensors_reach_the_epilogue_as_two_pointers(variant: str) -> None:
    """float32 scale_a and scale_b are the kernel's two scale pointers (HAS_SCALE 2): no launch multiplies them
    first; other dtypes are converted, one tensor is the one pointer (HAS_SCALE 1)."""
    a, b = fp8_pair(24, 40, 128, torch.float8_e4m3fn, seed=9)
    sa, sb = torch.tensor(0.5), torch.tensor([3.0])
    step = launch.plan_gemm(a, b, CONFIGS[variant], a_scale=sa, b_scale=sb, num_sms=3).steps[-1]
    assert step.kwargs["HAS_SCALE"] == 2 and step.args[5] is sa and step.args[6] is sb
    assert step.sources[5:7] == (5, 6)
    step = launch.plan_gemm(a, b, CONFIGS[variant], b_scale=sb, num_sms=3).steps[-1]
    assert step.kwargs["HAS_SCALE"] == 1 and step.args[5] is sb and step.sources[5:7] == (5, 2)
    half = torch.tensor(2.0, dtype=torch.bfloat16)
    step = launch.plan_gemm(a, b, CONFIGS[variant], a_scale=half, b_scale=sb, num_sms=3).steps[-1]
    assert step.kwargs["HAS_SCALE"] == 2 and step.args[5].dtype == torch.float32 and step.args[6] is sb
    step = launch.plan_gemm(a, b, CONFIGS[variant], a_scale=2.0, num_sms=3).steps[-1]
    assert step.kwargs["HAS_SCALE"] == 0 and step.kwargs["alpha"] == 2.0
