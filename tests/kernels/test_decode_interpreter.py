"""The decode family (``kernels.config.decode_configs``: M <= DECODE_MAX_M against large weights) in Triton's
interpreter, fp16/fp32, against float64 references: every M the family serves, odd and aligned N and K, the
nn.Linear layout (nt: B = W.t()) and nn, split and unsplit, the epilogue.  Outputs are NaN-poisoned first, so an
unwritten element fails."""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")
if torch.cuda.is_available():
    pytest.skip("interpreter tests run on CPU-only machines", allow_module_level=True)
os.environ["TRITON_INTERPRET"] = "1"  # before the kernels are imported: @triton.jit reads it then

from theodolite.kernels import ConfigError, GemmConfig, gemm  # noqa: E402
from theodolite.kernels.config import DECODE_MAX_M, decode_configs  # noqa: E402

TOL = {torch.float16: 1e-2, torch.float32: 1e-5}


def family(dtype: str) -> dict[str, GemmConfig]:
    return {c.key: c for c in decode_configs(dtype)}


def weights(n: int, k: int, layout: str, dtype: torch.dtype) -> torch.Tensor:
    """B of ``x @ B``: nt is nn.Linear's W.t() (W [N, K] row-major, so B is K-major), nn a row-major [K, N]."""
    if layout == "nt":
        return torch.randn(n, k).to(dtype).t()
    return torch.randn(k, n).to(dtype)


def run(a: torch.Tensor, b: torch.Tensor, config: GemmConfig, **kwargs: object) -> torch.Tensor:
    out = torch.full((a.shape[0], b.shape[1]), float("nan"), dtype=a.dtype)
    precision = "ieee" if a.dtype == torch.float32 else None
    result = gemm(a, b, config, out=out, num_sms=4, precision=precision, **kwargs)  # type: ignore[arg-type]
    assert result is out
    return out


def check(out: torch.Tensor, a: torch.Tensor, b: torch.Tensor, alpha: float = 1.0, beta: float = 0.0,
          c: torch.Tensor | None = None, bias: torch.Tensor | None = None) -> None:  # fmt: skip
    ref = alpha * (a.double() @ b.double())
    if c is not None:
        ref = ref + beta * c.double()
    if bias is not None:
        ref = ref + bias.double()
    assert not torch.isnan(out).any(), "unwritten (NaN-poisoned) output elements"
    err = (out.double() - ref).abs().max().item() / max(ref.abs().max().item(), 1e-6)
    assert err <= TOL[out.dtype], f"max rel error {err}"


@pytest.mark.parametrize("m", [1, 2, 7, 16, 33, 64])
@pytest.mark.parametrize("layout", ["nt", "nn"])
@pytest.mark.parametrize("nk", [(37, 301), (64, 512)])  # odd (misaligned rows, ragged tiles) and aligned
def test_decode_family_fp32(m: int, layout: str, nk: tuple[int, int]) -> None:
    n, k = nk
    configs = family("fp32")
    # a 16-row split tile, a 64-row split tile and an unsplit persistent one, by turns
    keys = ["splitk/16x64x128/g8/w4/s3/k2", "splitk/64x128x64/g8/w8/s3/k4", "persistent/16x64x128/g8/w4/s4/k1"]
    config = configs[keys[(m + len(layout) + n) % len(keys)]]
    a = torch.randn(m, k, dtype=torch.float32)
    b = weights(n, k, layout, torch.float32)
    check(run(a, b, config), a, b)


@pytest.mark.parametrize("key", sorted(family("fp16")))
def test_every_decode_config_fp16_nt(key: str) -> None:
    """Each config of the family once, on nn.Linear's layout with a K deep enough for every split."""
    config = family("fp16")[key]
    m, n, k = 3, 200, 16 * config.block_k + 40  # a ragged last K-step and a ragged column tile
    a = torch.randn(m, k).to(torch.float16)
    b = weights(n, k, "nt", torch.float16)
    check(run(a, b, config), a, b)


@pytest.mark.parametrize("key", ["splitk/16x128x128/g8/w4/s4/k4", "persistent/16x64x256/g8/w4/s4/k1"])
def test_decode_epilogue_fp16(key: str) -> None:
    """alpha, beta * C and a per-column bias (nn.Linear's) through the split reduction and the direct store."""
    config = family("fp16")[key]
    m, n, k = 5, 96, 1024
    a = torch.randn(m, k).to(torch.float16)
    b = weights(n, k, "nt", torch.float16)
    c = torch.randn(m, n).to(torch.float16)
    bias = torch.randn(n).to(torch.float16)
    out = run(a, b, config, alpha=0.5, beta=2.0, c=c, bias=bias)
    check(out, a, b, alpha=0.5, beta=2.0, c=c, bias=bias)


def test_decode_config_refuses_more_rows() -> None:
    config = family("fp16")["splitk/16x64x256/g8/w4/s3/k2"]
    a = torch.randn(DECODE_MAX_M + 1, 1024).to(torch.float16)
    b = weights(64, 1024, "nt", torch.float16)
    with pytest.raises(ConfigError, match=f"M <= {DECODE_MAX_M}"):
        gemm(a, b, config)
