"""fp8 scales on the CPU (Triton's interpreter runs fp8 dots), per tensor and rowwise: every form of scale gives the
scaled product, and a repeated scaled call takes gemm()'s launch cache (no new plan) with each call's scale values.

The launch cache is off in the interpreter (no compiled kernel to launch directly); ``cached_launches`` turns it on
with each launch run through the interpreter from the arguments the cache re-binds, so what a GPU's direct launch
would receive is what runs here.
"""

from __future__ import annotations

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
    "tma composite": GemmConfig("tma", 16, 16, 32, 2, 4, 2, block_n1=16),
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


def count_calls(monkeypatch: pytest.MonkeyPatch, name: str) -> list[int]:
    """A one-element list counting the calls of ``launch.<name>`` while the test runs."""
    calls = [0]
    real = getattr(launch, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(launch, name, counted)
    return calls


@pytest.fixture
def cached_launches(interpreted_launch_cache: None, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """gemm()'s launch cache on in the interpreter (tests/conftest.py); returns a one-element list counting
    plan_gemm calls."""
    return count_calls(monkeypatch, "plan_gemm")


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
                      ("2", "float or a tensor"), (True, "float or a tensor")):  # fmt: skip
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
    calls = count_calls(monkeypatch, "gemm")
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


def rowwise(m: int, n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """scale_a [M, 1] and scale_b [1, N] as torch._scaled_mm takes them rowwise (float32, positive)."""
    gen = torch.Generator().manual_seed(seed)
    return torch.rand(m, 1, generator=gen) + 0.5, torch.rand(1, n, generator=gen) + 0.5


def scaled(exact: torch.Tensor, sa: Any, sb: Any) -> torch.Tensor:
    """The exact product scaled by per-tensor or rowwise scales (None: 1)."""
    out = exact
    for s, shape in ((sa, (-1, 1)), (sb, (1, -1))):
        if isinstance(s, torch.Tensor):
            out = out * (s.double().reshape(()) if s.numel() == 1 else s.double().reshape(shape))
        elif s is not None:
            out = out * s
    return out


@pytest.mark.parametrize("variant", sorted(CONFIGS))
def test_rowwise_scales_scale_rows_and_columns(variant: str) -> None:
    """One scale per row of A and one per column of B (torch._scaled_mm's rowwise form), alone, together, with a
    per-tensor scale or a number beside them, of any float dtype and strides: rows and columns past the tiles' edge
    (M = 40, N = 56 in 16-wide tiles) masked."""
    m, n = 40, 56
    a, b = fp8_pair(m, n, 96, torch.float8_e4m3fn, seed=10)
    exact = a.double() @ b.double()
    rows, cols = rowwise(m, n, seed=11)
    strided_cols = torch.rand(n, 3)[:, 1] + 0.5  # [N] with stride 3: copied to consecutive float32
    forms = {
        "rows and columns": (rows, cols),
        "rows [M], columns [N]": (rows.reshape(m), cols.reshape(n)),
        "rows alone, bfloat16": (rows.to(torch.bfloat16), None),
        "columns alone, strided": (None, strided_cols),
        "rows and one element": (rows, torch.tensor([2.0])),
        "one element and columns": (torch.tensor(0.25), cols),
        "rows and a number": (rows, 3.0),
    }
    for name, (sa, sb) in forms.items():
        out = gemm(a, b, CONFIGS[variant], a_scale=sa, b_scale=sb, out_dtype=torch.float32, alpha=0.5, num_sms=3)
        assert rel_error(out, scaled(exact, sa, sb) * 0.5) <= 1e-5, (variant, name)
    out = gemm(a, b, CONFIGS[variant], a_scale=rows, b_scale=cols, num_sms=3)
    assert out.dtype == torch.bfloat16 and rel_error(out, scaled(exact, rows, cols)) <= 1e-2


def test_rowwise_forms_reach_the_epilogue() -> None:
    """Each scale form's HAS_SCALE (kernels.operands.SCALE_*) and what its two pointers carry."""
    from theodolite.kernels import operands

    a, b = fp8_pair(24, 40, 64, torch.float8_e4m3fn, seed=12)
    rows, cols = rowwise(24, 40, seed=13)
    one = torch.tensor([2.0])
    config = CONFIGS["persistent"]
    for sa, sb, form, first, second in (
        (rows, cols, operands.SCALE_ROWS_COLS, rows, cols), (rows, None, operands.SCALE_ROWS, rows, None),
        (None, cols, operands.SCALE_COLS, cols, None), (rows, one, operands.SCALE_ROWS_ONE, rows, one),
        (one, cols, operands.SCALE_COLS_ONE, cols, one), (one, one, operands.SCALE_TWO, one, one),
    ):  # fmt: skip
        step = launch.plan_gemm(a, b, config, a_scale=sa, b_scale=sb, num_sms=3).steps[-1]
        assert step.kwargs["HAS_SCALE"] == form and step.args[5] is first
        assert step.args[6] is second if second is not None else step.sources[6] == 2


def test_rowwise_scales_of_the_wrong_shape_are_named(cached_launches: list[int]) -> None:
    a, b = fp8_pair(24, 40, 64, torch.float8_e4m3fn, seed=14)
    config = CONFIGS["persistent"]
    for kwargs, match in (
        ({"a_scale": torch.ones(40, 1)}, r"scale_a must be a per-tensor scale \(one element\) or one per row of a "
                                         r"\(\[24 x 1\]"),
        ({"b_scale": torch.ones(40, 1)}, r"one per column of b \(\[1 x 40\]"),
        ({"a_scale": torch.ones(1, 24)}, "one per row of a"),
    ):  # fmt: skip
        with pytest.raises(ConfigError, match=match):
            gemm(a, b, config, **kwargs)
    a3, b3 = a.unsqueeze(0).expand(2, -1, -1), b.unsqueeze(0).expand(2, -1, -1)
    with pytest.raises(ConfigError, match="2-D problems only"):
        gemm(a3, b3, config, a_scale=torch.ones(24, 1))
    assert len(launch._FAST) == 0  # named while planning: nothing ran, nothing cached


def test_a_repeated_rowwise_call_takes_the_launch_cache(cached_launches: list[int]) -> None:
    """New row and column scales of the same metadata reuse the plan and are read anew; a strided scale (copied to
    consecutive float32 by the rule) is another key, not a consecutive scale's plan misreading it."""
    config = CONFIGS["persistent"]
    a, b = fp8_pair(24, 40, 64, torch.float8_e4m3fn, seed=15)
    exact = a.double() @ b.double()
    for seed in (16, 17):
        rows, cols = rowwise(24, 40, seed=seed)
        out = gemm(a, b, config, a_scale=rows, b_scale=cols, out_dtype=torch.float32, num_sms=3)
        assert rel_error(out, scaled(exact, rows, cols)) <= 1e-5
    assert cached_launches[0] == 1 and len(launch._FAST) == 1
    strided = torch.rand(40, 2)[:, 0] + 0.5
    out = gemm(a, b, config, a_scale=rows, b_scale=strided, out_dtype=torch.float32, num_sms=3)
    assert rel_error(out, scaled(exact, rows, strided)) <= 1e-5
    assert cached_launches[0] == 2 and len(launch._FAST) == 2
