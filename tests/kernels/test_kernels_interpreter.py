"""CPU tests of every kernel variant in Triton's interpreter (TRITON_INTERPRET=1), fp16/fp32, small shapes.

Outputs are poisoned with NaN before each run so an unwritten tile fails.  Skipped where a GPU is
visible (the GPU tests cover the compiled kernels there).
"""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")
if torch.cuda.is_available():
    pytest.skip("interpreter tests run on CPU-only machines", allow_module_level=True)
os.environ["TRITON_INTERPRET"] = "1"  # before the kernels are imported: @triton.jit reads it then

from theodolite.kernels import ConfigError, GemmConfig, gemm, needs_aligned_copy, plan_gemm, problem_of  # noqa: E402
from theodolite.kernels.config import EDGE_COLUMNS, EDGE_ROWS  # noqa: E402

from theodolite.errors import TheodoliteError  # noqa: E402

CONFIGS = {
    "persistent": GemmConfig("persistent", 16, 16, 16, 2, 4, 2),
    "streamk": GemmConfig("streamk", 16, 16, 16, 2, 4, 2),
    "splitk": GemmConfig("splitk", 16, 16, 16, 2, 4, 2, split_k=3),
    "tma": GemmConfig("tma", 16, 16, 16, 2, 4, 2),
}
TOL = {torch.float16: 1e-2, torch.float32: 1e-5}


def operand(rows: int, cols: int, transposed: bool, dtype: torch.dtype, batch: int | None = None) -> torch.Tensor:
    lead = () if batch is None else (batch,)
    if transposed:
        return torch.randn(*lead, cols, rows).to(dtype).transpose(-1, -2)
    return torch.randn(*lead, rows, cols).to(dtype)


def check(out: torch.Tensor, a: torch.Tensor, b: torch.Tensor, dtype: torch.dtype, **epi: object) -> None:
    ref = torch.matmul(a.double(), b.double()) * float(epi.get("alpha", 1.0))
    if epi.get("c") is not None:
        ref = ref + float(epi.get("beta", 0.0)) * epi["c"].double()  # type: ignore[union-attr]
    if epi.get("bias") is not None:
        bias = epi["bias"].double()  # type: ignore[union-attr]
        ref = ref + (bias if bias.dim() == 1 and bias.shape[0] == ref.shape[-1] else bias.reshape(-1, 1))
    assert not torch.isnan(out).any(), "unwritten (NaN-poisoned) output elements"
    scale = max(ref.abs().max().item(), 1e-6)
    err = (out.double() - ref).abs().max().item() / scale
    assert err <= TOL[dtype], f"max rel error {err}"


def run(a: torch.Tensor, b: torch.Tensor, config: GemmConfig, **kwargs: object) -> torch.Tensor:
    batch = a.shape[0] if a.dim() == 3 else (b.shape[0] if b.dim() == 3 else None)
    shape = (a.shape[-2], b.shape[-1]) if batch is None else (batch, a.shape[-2], b.shape[-1])
    out_dtype = kwargs.pop("out_dtype", None)
    dtype = out_dtype if out_dtype is not None else a.dtype
    out = torch.full(shape, float("nan"), dtype=dtype)  # type: ignore[arg-type]
    precision = "ieee" if a.dtype == torch.float32 else None
    result = gemm(a, b, config, out=out, num_sms=3, precision=precision, **kwargs)  # type: ignore[arg-type]
    assert result is out
    return out


SHAPES = [(1, 1, 1), (17, 33, 65), (40, 24, 100)]


@pytest.mark.parametrize("variant", ["persistent", "streamk", "splitk"])
@pytest.mark.parametrize("layout", ["nn", "nt", "tn", "tt"])
@pytest.mark.parametrize("shape", SHAPES)
def test_variants_layouts_odd_shapes_fp32(variant: str, layout: str, shape: tuple[int, int, int]) -> None:
    m, n, k = shape
    config = CONFIGS[variant]
    if variant == "splitk" and k < 48:
        config = GemmConfig("splitk", 16, 16, 16, 2, 4, 2, split_k=1)
    a = operand(m, k, layout[0] == "t", torch.float32)
    b = operand(k, n, layout[1] == "t", torch.float32)
    check(run(a, b, config), a, b, torch.float32)


@pytest.mark.parametrize("variant", ["persistent", "streamk", "splitk", "tma"])
@pytest.mark.parametrize("layout", ["nn", "tt"])
def test_variants_fp16(variant: str, layout: str) -> None:
    m, n, k = 24, 40, 64  # rows aligned to 16 bytes so tma is legal
    a = operand(m, k, layout[0] == "t", torch.float16)
    b = operand(k, n, layout[1] == "t", torch.float16)
    check(run(a, b, CONFIGS[variant]), a, b, torch.float16)


@pytest.mark.parametrize("layout", ["nn", "nt", "tn", "tt"])
def test_tma_layouts_fp32_in_kernel_descriptors(monkeypatch: pytest.MonkeyPatch, layout: str) -> None:
    """THEODOLITE_TMA_HOST_DESC=0: the kernel builds its own descriptors (the default is host-made ones, below)."""
    monkeypatch.setenv("THEODOLITE_TMA_HOST_DESC", "0")
    m, n, k = 20, 36, 52  # multiples of 4 fp32 elements: 16-byte rows
    a = operand(m, k, layout[0] == "t", torch.float32)
    b = operand(k, n, layout[1] == "t", torch.float32)
    check(run(a, b, CONFIGS["tma"]), a, b, torch.float32)
    step = plan_gemm(a, b, CONFIGS["tma"]).steps[-1]
    assert "HOST_DESC" not in step.kwargs and isinstance(step.args[0], torch.Tensor)


def test_tma_host_descriptors_are_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("THEODOLITE_TMA_HOST_DESC", raising=False)
    a, b = operand(20, 52, False, torch.float32), operand(52, 36, False, torch.float32)
    assert plan_gemm(a, b, CONFIGS["tma"]).steps[-1].kwargs["HOST_DESC"]


@pytest.mark.parametrize("layout", ["nn", "nt", "tn", "tt"])
def test_tma_host_descriptors(monkeypatch: pytest.MonkeyPatch, layout: str) -> None:
    """THEODOLITE_TMA_HOST_DESC=1: the operand descriptors made by plan_gemm, the same boxes as the kernel's own."""
    monkeypatch.setenv("THEODOLITE_TMA_HOST_DESC", "1")
    m, n, k = 20, 36, 52
    a = operand(m, k, layout[0] == "t", torch.float32)
    b = operand(k, n, layout[1] == "t", torch.float32)
    check(run(a, b, CONFIGS["tma"]), a, b, torch.float32)
    step = plan_gemm(a, b, CONFIGS["tma"]).steps[-1]
    assert step.kwargs["HOST_DESC"] and [type(x).__name__ for x in step.args[:2]] == ["TensorDescriptor"] * 2
    # out, the dummies of C, bias and the two scales, and B again for the composite tile's unused second part
    assert step.sources[2:] == (2, 2, 2, 2, 2, 1)


def test_tma_host_descriptors_batched_and_copied(monkeypatch: pytest.MonkeyPatch) -> None:
    import theodolite.kernels.config as config_module

    monkeypatch.setenv("THEODOLITE_TMA_HOST_DESC", "1")
    a = operand(20, 48, False, torch.float32, batch=3)
    b = operand(48, 24, True, torch.float32, batch=3)
    check(run(a, b, CONFIGS["tma"]), a, b, torch.float32)
    # a misaligned A copied into a padded buffer: its descriptor is over the buffer, a constant of the plan
    monkeypatch.setattr(config_module, "ALIGN_COPY_MIN_FLOPS", 0.0)
    monkeypatch.setattr(config_module, "ALIGN_COPY_MIN_REUSE", 1)
    a = operand(20, 33, False, torch.float16)
    b = operand(33, 40, False, torch.float16)
    check(run(a, b, CONFIGS["tma"]), a, b, torch.float16)
    sources = plan_gemm(a, b, CONFIGS["tma"]).steps[-1].sources
    assert sources[0] is None and sources[1].source == 1  # B's rows are aligned: re-made over each call's B


@pytest.mark.parametrize("variant", ["persistent", "streamk", "splitk", "tma"])
def test_batched(variant: str) -> None:
    a = operand(20, 48, False, torch.float32, batch=3)
    b = operand(48, 24, True, torch.float32, batch=3)
    check(run(a, b, CONFIGS[variant]), a, b, torch.float32)
    if variant != "tma":  # a 2-D B broadcast over the batch
        b2 = operand(48, 24, False, torch.float32)
        check(run(a, b2, CONFIGS[variant]), a, b2, torch.float32)


@pytest.mark.parametrize(
    ("k", "split"),
    [(100, 3), (80, 4), (48, 3), (33, 2)],  # uneven slices; (80, 4): the last slice is empty
)
def test_splitk_remainders(k: int, split: int) -> None:
    a = operand(18, k, False, torch.float32)
    b = operand(k, 20, False, torch.float32)
    check(run(a, b, GemmConfig("splitk", 16, 16, 16, 2, 4, 2, split)), a, b, torch.float32)


@pytest.mark.parametrize(
    ("m", "n", "k", "sms", "dp_tiles", "split"),
    [  # the interpreter's limits give this config 4 programs per SM
        (40, 40, 70, 3, 0, 1),  # 9 tiles on 12 programs; 5 K-steps are too few to split
        (16, 16, 200, 5, 0, 3),  # one tile: 13 K-steps in 3 slices (4, 4, 5) of at least 4
        (16, 16, 600, 5, 0, 8),  # one tile: 38 K-steps in the most slices, 8
        (33, 47, 17, 2, 8, 1),  # 9 tiles on 8 programs: a wave, then one tile of 2 K-steps whole
        (40, 48, 160, 2, 8, 2),  # a wave, then one tile in 2 slices of 5 K-steps
        (40, 48, 512, 1, 8, 4),  # two waves, then one tile in 4 slices (all 4 programs)
        (70, 16, 300, 4, 0, 3),  # 5 tiles in 3 slices each on 16 programs
        (48, 64, 256, 1, 12, 1),  # 12 tiles on 4 programs: three full waves, no tail
    ],
)
def test_streamk_partitions(m: int, n: int, k: int, sms: int, dp_tiles: int, split: int) -> None:
    a = operand(m, k, False, torch.float32)
    b = operand(k, n, False, torch.float32)
    plan = plan_gemm(a, b, CONFIGS["streamk"], num_sms=sms, precision="ieee")
    step = plan.steps[-1]
    if split == 1:  # nothing to split: the same data-parallel schedule, run by the persistent kernel
        from theodolite.kernels.persistent import persistent_kernel

        tiles = -(-m // CONFIGS["streamk"].block_m) * -(-n // CONFIGS["streamk"].block_n)
        assert step.kernel is persistent_kernel
        assert step.grid == (min(tiles, 4 * sms),) and step.kwargs["FLATTEN"] is False
        assert dp_tiles == tiles - tiles % (4 * sms)
    else:
        assert (step.kwargs["dp_tiles"], step.kwargs["split"]) == (dp_tiles, split)
    out = torch.full((m, n), float("nan"))
    gemm(a, b, CONFIGS["streamk"], out=out, num_sms=sms, precision="ieee")
    check(out, a, b, torch.float32)
    again = gemm(a, b, CONFIGS["streamk"], num_sms=sms, precision="ieee")
    assert torch.equal(out, again), "Stream-K must be deterministic"


@pytest.mark.parametrize("key", ["persistent/16x64x16/g8/w4/s2/k1", "persistent/16x64x32/g8/w4/s2/k1"])
def test_short_k_configs(key: str) -> None:
    """The space's short-K entries: K = 18 in one or two steps, the rows past K masked, misaligned rows too."""
    a = operand(37, 18, False, torch.float16)
    b = operand(18, 45, False, torch.float16)
    check(run(a, b, GemmConfig.from_key(key)), a, b, torch.float16)


def test_splitk_deterministic() -> None:
    a = operand(20, 160, False, torch.float32)
    b = operand(160, 20, False, torch.float32)
    first = gemm(a, b, CONFIGS["splitk"], precision="ieee")
    assert torch.equal(first, gemm(a, b, CONFIGS["splitk"], precision="ieee"))


@pytest.mark.parametrize("variant", ["persistent", "streamk", "splitk"])
def test_nan_inf_propagate(variant: str) -> None:
    a = operand(20, 48, False, torch.float32)
    b = operand(48, 20, False, torch.float32)
    a[3, 5] = float("nan")
    b[7, 11] = float("inf")
    out = gemm(a, b, CONFIGS[variant], num_sms=3, precision="ieee")
    ref = torch.matmul(a, b)
    assert torch.equal(torch.isnan(out), torch.isnan(ref))
    assert torch.equal(torch.isinf(out), torch.isinf(ref))


@pytest.mark.parametrize("variant", ["persistent", "streamk", "splitk", "tma"])
def test_epilogue_alpha_beta_bias(variant: str) -> None:
    a = operand(20, 48, False, torch.float32)
    b = operand(48, 36, False, torch.float32)
    c = torch.randn(20, 36)
    col = torch.randn(36)
    row = torch.randn(20, 1)
    check(run(a, b, CONFIGS[variant], alpha=0.5, beta=2.0, c=c, bias=col), a, b, torch.float32,
          alpha=0.5, beta=2.0, c=c, bias=col)  # fmt: skip
    check(run(a, b, CONFIGS[variant], bias=row), a, b, torch.float32, bias=row)
    # beta == 0: C is not read (NaN in C must not leak)
    c_nan = torch.full((20, 36), float("nan"))
    check(run(a, b, CONFIGS[variant], c=c_nan, beta=0.0), a, b, torch.float32)


def test_out_dtype_fp32_from_fp16() -> None:
    a = operand(17, 32, False, torch.float16)
    b = operand(32, 16, False, torch.float16)
    out = gemm(a, b, CONFIGS["persistent"], out_dtype=torch.float32)
    assert out.dtype == torch.float32
    check(out, a, b, torch.float16)


def test_fp32_defaults_to_tf32_problem() -> None:
    a, b = torch.randn(8, 16), torch.randn(16, 8)
    assert problem_of(a, b).dtype == "tf32"
    assert problem_of(a, b, precision="ieee").dtype == "fp32"
    assert problem_of(torch.randn(16, 8).t(), b).layout == "tn"


def test_zero_sized_dims() -> None:
    cfg = CONFIGS["persistent"]
    assert gemm(torch.randn(0, 5), torch.randn(5, 7), cfg).shape == (0, 7)
    assert gemm(torch.randn(4, 5), torch.randn(5, 0), cfg).shape == (4, 0)
    assert gemm(torch.randn(0, 4, 5), torch.randn(0, 5, 3), cfg).shape == (0, 4, 3)
    c = torch.randn(4, 7)
    bias = torch.randn(7)
    out = gemm(torch.randn(4, 0), torch.randn(0, 7), cfg, beta=3.0, c=c, bias=bias)
    torch.testing.assert_close(out, 3.0 * c + bias)
    assert torch.equal(gemm(torch.randn(4, 0), torch.randn(0, 7), cfg), torch.zeros(4, 7))


def test_misaligned_operand_copy_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    a = operand(20, 33, False, torch.float16)  # rows of 33 fp16 = 66 bytes: misaligned
    b = operand(33, 130, False, torch.float16)  # misaligned too, but M=20 < the reuse threshold
    problem = problem_of(a, b)
    assert needs_aligned_copy(problem) == (False, False)  # far below ALIGN_COPY_MIN_FLOPS: no copy
    import theodolite.kernels.config as config_module

    monkeypatch.setattr(config_module, "ALIGN_COPY_MIN_FLOPS", 0.0)  # exercise the copy on a small shape
    assert needs_aligned_copy(problem) == (True, False)
    plan = plan_gemm(a, b, CONFIGS["persistent"])
    assert len(plan.steps) == 2  # the copy of A, then the kernel
    # the copy's rows start on 128-byte boundaries (an odd multiple of 16 bytes slows cp.async: row_pitch.py)
    assert plan.steps[0].dst.stride(-2) * 2 == 128
    check(plan.run(), a, b, torch.float16)
    b2 = operand(33, 128, False, torch.float16)
    check(plan_gemm(a, b2, CONFIGS["tma"]).run(), a, b2, torch.float16)  # tma legal through the copy of A


def test_rows_too_long_for_int32_offsets_are_copied(monkeypatch: pytest.MonkeyPatch) -> None:
    """An element-wise operand is addressed by int32 offsets inside a tile (up to 256 rows of its stride): rows of
    SCALAR_OFFSET_MAX_ROW elements or more are copied whatever the FLOPs, by the Problem's rule (contiguous operands,
    what the model sees) and by gemm() from the real stride of a view (here lowered so a small tensor reaches it)."""
    import theodolite.kernels.config as config_module
    import theodolite.kernels.launch as launch_module
    from theodolite.kernels import Problem
    from theodolite.kernels.launch import _AlignedCopy

    long = config_module.SCALAR_OFFSET_MAX_ROW
    assert long * 256 <= 2**31
    assert needs_aligned_copy(Problem(2, 3, long + 1)) == (True, False)  # A's rows: K elements, odd: misaligned
    assert needs_aligned_copy(Problem(2, long + 1, 3)) == (False, True)  # B's rows: N elements
    assert needs_aligned_copy(Problem(2, 3, long + 1, layout="tn")) == (False, False)  # A column-major: rows of M
    assert needs_aligned_copy(Problem(2, 3, long - 1)) == (False, False)  # just under: element-wise, uncopied
    monkeypatch.setattr(launch_module, "SCALAR_OFFSET_MAX_ROW", 64)
    storage = operand(20, 67, False, torch.float16)  # rows 67 apart (odd: misaligned), 49 used
    a = storage[:, :49]
    b = operand(49, 24, False, torch.float16)
    plan = plan_gemm(a, b, CONFIGS["splitk"])
    assert isinstance(plan.steps[0], _AlignedCopy) and len(plan.steps) == 2
    check(plan.run(), a, b, torch.float16)
    short = operand(20, 49, False, torch.float16)  # rows of 49 < 64: read element-wise in place
    assert not any(isinstance(step, _AlignedCopy) for step in plan_gemm(short, b, CONFIGS["splitk"]).steps)


@pytest.mark.parametrize("transposed", [False, True])
def test_aligned_copy_step_rebinds_to_a_new_operand(monkeypatch: pytest.MonkeyPatch, transposed: bool) -> None:
    """gemm()'s launch cache re-runs a plan's copy steps on each call's operand: the step must read the
    tensor it is given, not the one the plan was made with (else a cached call multiplies stale data)."""
    import theodolite.kernels.config as config_module
    from theodolite.kernels.launch import _AlignedCopy

    monkeypatch.setattr(config_module, "ALIGN_COPY_MIN_FLOPS", 0.0)
    a = operand(20, 33, transposed, torch.float16)
    b = operand(33, 130, False, torch.float16)
    plan = plan_gemm(a, b, CONFIGS["persistent"])
    copy = plan.steps[0]
    assert isinstance(copy, _AlignedCopy) and copy.source == 0
    fresh = operand(20, 33, transposed, torch.float16)
    assert fresh.stride() == a.stride()
    copy.run_from(fresh)
    torch.testing.assert_close(copy.dst, copy.view(fresh), rtol=0, atol=0)
    assert not torch.equal(copy.dst, copy.view(a))
    for launch in plan.steps[1:]:
        launch()
    check(plan.out, fresh, b, torch.float16)


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
@pytest.mark.parametrize(
    ("batch", "outer", "inner", "offset"), [(1, 5, 21, 0), (1, 3, 130, 1), (3, 4, 36, 2), (2, 2, 8, 4)]
)
def test_padded_copy_moves_bits_and_zero_fills_the_pad(
    dtype: torch.dtype, batch: int, outer: int, inner: int, offset: int
) -> None:
    """The aligned copy's kernel: every element's bits (NaN payloads and -0.0 too), source rows of any alignment (its
    vector the widest dividing base, strides and extent), the pad past the row zero, nothing past the buffer."""
    from theodolite.kernels.padded_copy import copy_arguments, padded_copy_kernel

    pitch = inner + 3  # a row stride that is not a multiple of the extent
    storage = torch.randn(batch * outer * pitch + offset).to(dtype)
    storage[offset] = -0.0
    storage[offset + 1] = float("nan")
    src = storage[offset:].as_strided((batch, outer, inner), (outer * pitch, pitch, 1))
    padded = -(-inner // 64) * 64
    buf = torch.full((batch, outer, padded + 64), 7.0, dtype=dtype)[..., :padded]  # poison, and a guard column
    buf[..., inner:] = 0.0  # as _aligned_copy leaves it
    buf[..., :inner] = 9.0
    grid, args, kwargs = copy_arguments(src, buf)
    padded_copy_kernel[grid](*args, **kwargs)
    bits = {2: torch.int16, 4: torch.int32}[src.element_size()]
    assert torch.equal(buf[..., :inner].view(bits), src.view(bits))
    assert torch.count_nonzero(buf[..., inner:]) == 0
    guard = buf.as_strided((batch, outer, 64), buf.stride(), padded)
    assert torch.equal(guard, torch.full((batch, outer, 64), 7.0, dtype=dtype))


def test_padded_copy_numbers_its_tiles_along_one_grid_dimension() -> None:
    """A tall operand (3 million rows) needs more row blocks than a second grid dimension holds (65535): the copy's
    tiles, batch included, are numbered along the first."""
    from theodolite.kernels.padded_copy import copy_arguments

    rows, cols = 3_000_000, 130
    src = torch.empty(cols + 1, dtype=torch.float16)[1:].as_strided((2, rows, cols), (0, 0, 1))  # (shape only)
    buf = torch.empty(192, dtype=torch.float16).as_strided((2, rows, 192), (0, 0, 1))
    grid, args, kwargs = copy_arguments(src, buf)
    col_blocks, tiles = args[-2], args[-1]
    assert grid == (2 * tiles, 1, 1) and tiles == col_blocks * -(-rows // kwargs["BLOCK_R"]) > 65535
    assert col_blocks * kwargs["BLOCK_C"] >= 136 and kwargs["VEC"] == 1  # 130 rounded up to 16 bytes; odd base


@pytest.mark.parametrize(
    ("k", "n", "offset", "a_vec", "b_vec"),
    [(98, 38, 0, 2, 2), (84, 36, 0, 4, 4), (84, 36, 2, 2, 4), (84, 36, 1, 1, 1), (85, 36, 0, 1, 1)],
)
@pytest.mark.parametrize("variant", ["persistent", "splitk"])
def test_partial_vectors_of_misaligned_rows(k: int, n: int, offset: int, a_vec: int, b_vec: int, variant: str) -> None:
    """Rows that are not 16-byte aligned are read with the widest vector dividing their length, strides and
    base address (A_VEC/B_VEC 4 or 2 for fp16); when one operand can only be read element-wise, so is the
    other misaligned one (the scalar binary: no mixed partial vectors)."""
    storage = torch.randn(20 * k + 8).to(torch.float16)
    a = storage[offset : offset + 20 * k].view(20, k)  # offset: a base only 2- or 4-byte aligned
    b = operand(k, n, False, torch.float16)
    plan = plan_gemm(a, b, CONFIGS[variant])
    (launch,) = plan.steps  # below the copy threshold: no aligned copy, one kernel
    assert (launch.kwargs["A_VEC"], launch.kwargs["B_VEC"]) == (a_vec, b_vec)
    assert launch.kwargs["KA_VEC"] == a_vec
    plan.out.fill_(float("nan"))
    check(plan.run(), a, b, torch.float16)


@pytest.mark.parametrize("layout", ["nn", "nt", "tn", "tt"])
@pytest.mark.parametrize("variant", ["persistent", "streamk", "splitk"])
def test_masked_edges(monkeypatch: pytest.MonkeyPatch, variant: str, layout: str) -> None:
    """Edge rows/columns masked instead of wrapped (split-K's small tiles by the rule; every variant under the
    experiments' override "all"): ragged M = 40 and N = 24 over 16x16 tiles, read with 16-byte vectors along a
    contiguous M or N, so a mask at the wrong element drops or duplicates valid rows/columns."""
    from theodolite.kernels import config as config_module

    monkeypatch.setattr(config_module, "MASKED_EDGES", "all")
    a = operand(40, 48, layout[0] == "t", torch.float16)
    b = operand(48, 24, layout[1] == "t", torch.float16)
    (launch,) = plan_gemm(a, b, CONFIGS[variant]).steps
    assert launch.kwargs["EDGE_MASK"] == EDGE_ROWS | EDGE_COLUMNS
    assert max(launch.kwargs["A_VEC"], launch.kwargs["B_VEC"]) == 8
    check(run(a, b, CONFIGS[variant]), a, b, torch.float16)


def test_masked_edges_rule() -> None:
    from theodolite.kernels.config import edge_mask, masked_edges

    both = EDGE_ROWS | EDGE_COLUMNS
    assert masked_edges(GemmConfig("splitk", 16, 64, 128, 8, 4, 4, split_k=4)) == both
    assert masked_edges(GemmConfig("splitk", 32, 128, 64, 8, 4, 4, split_k=2)) == both
    assert masked_edges(GemmConfig("splitk", 64, 64, 128, 8, 4, 4, split_k=4)) == 0
    assert masked_edges(GemmConfig("persistent", 16, 64, 128, 8, 4, 4)) == 0
    assert masked_edges(GemmConfig("streamk", 128, 128, 64, 8, 8, 4)) == 0
    # a launch masks a dimension shorter than its tile (decode rows, a narrow N), never a longer ragged one
    tall = GemmConfig("persistent", 128, 32, 64, 8, 4, 4)
    assert edge_mask(tall, 2, 7487) == EDGE_ROWS
    assert edge_mask(tall, 200, 7487) == 0
    assert edge_mask(tall, 200, 28) == EDGE_COLUMNS
    assert edge_mask(tall, 1, 28) == both
    assert edge_mask(GemmConfig("splitk", 16, 64, 128, 8, 4, 4, split_k=4), 4096, 4096) == both


@pytest.mark.parametrize("layout", ["nn", "nt", "tn", "tt"])
@pytest.mark.parametrize("variant", ["persistent", "streamk", "splitk"])
def test_short_dimension_masked(variant: str, layout: str) -> None:
    """M = 3 rows and N = 5 columns under 16x16 tiles: the launch masks both (not loaded) instead of wrapping,
    with 16-byte vectors where a dimension is contiguous; the product must be exact in every layout."""
    config = GemmConfig(variant, 16, 16, 16, 2, 4, 2, split_k=3 if variant == "splitk" else 1)
    for m, n, expected in ((3, 40, EDGE_ROWS), (40, 5, EDGE_COLUMNS), (3, 5, EDGE_ROWS | EDGE_COLUMNS)):
        a = operand(m, 48, layout[0] == "t", torch.float16)
        b = operand(48, n, layout[1] == "t", torch.float16)
        launches = [s for s in plan_gemm(a, b, config).steps if hasattr(s, "kwargs") and "EDGE_MASK" in s.kwargs]
        assert launches and launches[0].kwargs["EDGE_MASK"] & expected == expected
        check(run(a, b, config), a, b, torch.float16)


def test_partial_vectors_switch_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("THEODOLITE_PARTIAL_VEC", "0")
    a = operand(20, 44, False, torch.float16)
    b = operand(44, 36, True, torch.float16)
    (launch,) = plan_gemm(a, b, CONFIGS["persistent"]).steps
    assert (launch.kwargs["A_VEC"], launch.kwargs["B_VEC"]) == (1, 1)
    check(run(a, b, CONFIGS["persistent"]), a, b, torch.float16)


@pytest.mark.parametrize("variant", ["persistent", "tma"])
def test_flattened_loop_many_tiles_per_program(variant: str) -> None:
    """A flattened tile loop (GemmConfig.flatten) over several tiles per program (num_sms=3 in run())."""
    config = GemmConfig(variant, 16, 16, 16, 2, 4, 2, flatten=True)
    a = operand(70, 48, False, torch.float16)
    b = operand(48, 56, True, torch.float16)
    check(run(a, b, config), a, b, torch.float16)


def test_strided_views() -> None:
    big = torch.randn(40, 70)
    a = big[3:23, 5:37]  # row stride 70, offset start
    b = torch.randn(64, 24)[::2]  # row stride 48 (every other row)
    check(run(a, b, CONFIGS["persistent"]), a, b, torch.float32)
    neither = torch.randn(20, 2, 32)[:, 0, :]  # contiguous rows, fine
    check(run(neither, b, CONFIGS["persistent"]), neither, b, torch.float32)


@pytest.mark.parametrize("variant", list(CONFIGS))
def test_padded_output_and_c_leave_their_neighbours(variant: str) -> None:
    """Output and C in buffers with 16-byte rows and N not a multiple of 8 (the epilogue promises contiguous columns
    only): right results, and the buffer's columns past N untouched."""
    a = operand(20, 64, False, torch.float16)  # K = 64: four K-steps, enough for split-K's three slices
    b = operand(64, 27, True, torch.float16)  # stored [27, 64]: aligned rows whatever N is (TMA needs them)
    buf = torch.full((20, 32), 7.0, dtype=torch.float16)
    out = buf[:, :27]
    out.fill_(float("nan"))
    c = torch.randn(20, 32).half()[:, :27]
    assert gemm(a, b, CONFIGS[variant], out=out, c=c, beta=1.0, num_sms=3) is out
    check(out, a, b, torch.float16, c=c, beta=1.0)
    assert (buf[:, 27:] == 7.0).all()


def test_epilogue_promises_are_never_wider_than_the_column_mask() -> None:
    from theodolite.kernels.launch import _epilogue_vecs

    half = torch.float16
    dense = torch.empty(1, 20, 32, dtype=half)
    padded = torch.empty(1, 20, 32, dtype=half)[:, :, :27]  # 16-byte rows, N = 27: a per-element mask
    strided = torch.empty(1, 32, 20, dtype=half).transpose(1, 2)
    assert _epilogue_vecs(dense, None, 32) == (8, 0, 8)
    assert _epilogue_vecs(dense, dense, 32) == (8, 8, 8)
    assert _epilogue_vecs(padded, padded, 27) == (1, 1, 1)
    assert _epilogue_vecs(torch.empty(1, 20, 27, dtype=half), None, 27) == (1, 0, 1)
    assert _epilogue_vecs(strided, dense, 20) == (0, 1, 1)
    # an even N: 4-byte vectors, as wide as N's lowest set bit allows (the rows would take 16 bytes)
    assert _epilogue_vecs(torch.empty(1, 20, 32, dtype=half)[:, :, :30], dense, 30) == (2, 2, 2)
    assert _epilogue_vecs(torch.empty(1, 20, 32, dtype=half)[:, :, :28], dense, 28) == (4, 4, 4)
    # 16-byte rows starting two elements in: 4-byte vectors, no wider
    assert _epilogue_vecs(torch.empty(1, 20, 40, dtype=half)[:, :, 2:34], None, 32) == (2, 0, 2)
    # fp32 output (4 a vector), N = 36: C's 8-element promise narrows to the mask's 4
    assert _epilogue_vecs(torch.empty(1, 20, 36), torch.empty(1, 20, 40, dtype=half)[:, :, :36], 36) == (4, 4, 4)


@pytest.mark.parametrize("variant", list(CONFIGS))
@pytest.mark.parametrize("n", [26, 28, 30])
def test_even_n_outputs_with_c(variant: str, n: int) -> None:
    """Outputs whose rows are 4- or 8-byte aligned only (the partial-vector experiment: out_vec.py --wide)."""
    a = operand(20, 64, False, torch.float16)
    b = operand(64, n, True, torch.float16)
    c = torch.randn(20, n).half()
    check(run(a, b, CONFIGS[variant], c=c, beta=0.5), a, b, torch.float16, c=c, beta=0.5)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: gemm("a", torch.randn(2, 2), CONFIGS["persistent"]), "torch.Tensor"),
        (lambda: gemm(torch.randn(2, 3), torch.randn(4, 2), CONFIGS["persistent"]), "inner dimensions"),
        (lambda: gemm(torch.randn(2, 3, 4), torch.randn(3, 4, 2), CONFIGS["persistent"]), "batch sizes"),
        (lambda: gemm(torch.randn(3), torch.randn(3, 2), CONFIGS["persistent"]), "2-D or 3-D"),
        (
            lambda: gemm(torch.randn(2, 3).double(), torch.randn(3, 2).double(), CONFIGS["persistent"]),
            "unsupported dtype",
        ),
        (lambda: gemm(torch.randn(2, 3), torch.randn(3, 2).half(), CONFIGS["persistent"]), "same dtype"),
        (lambda: gemm(torch.randn(2, 3), torch.randn(3, 2, device="meta"), CONFIGS["persistent"]), "different devices"),
        (
            lambda: gemm(torch.randn(2, 64), torch.randn(64, 2), GemmConfig("splitk", 16, 16, 16, 2, 4, 2, 8)),
            "exceeds K",
        ),
        (lambda: gemm(torch.randn(2, 3), torch.randn(3, 2), "persistent/16x16x16"), "GemmConfig"),
        (lambda: gemm(torch.randn(2, 3), torch.randn(3, 2), CONFIGS["persistent"], bias=torch.randn(5)), "bias"),
        (
            lambda: gemm(torch.randn(2, 3), torch.randn(3, 2), CONFIGS["persistent"], out=torch.empty(3, 3)),
            "out has shape",
        ),
        (
            lambda: gemm(torch.randn(2, 3).half(), torch.randn(3, 2).half(), CONFIGS["persistent"], precision="ieee"),
            "float32",
        ),
        (lambda: gemm(torch.randn(2, 3), torch.randn(3, 2), CONFIGS["persistent"], out_dtype="int8"), "output dtype"),
        (lambda: gemm(torch.randn(2, 3), torch.randn(3, 2), CONFIGS["persistent"], a_scale=2.0), "fp8"),
        (
            lambda: gemm(torch.randn(2, 3), torch.randn(3, 2), CONFIGS["persistent"], c=torch.randn(5, 5), beta=1.0),
            "broadcast",
        ),
        (lambda: gemm(torch.randn(2, 3), torch.randn(3, 2), CONFIGS["persistent"], num_sms=0), "num_sms"),
        (lambda: gemm(torch.randn(4, 5), torch.randn(5, 3), CONFIGS["tma"]), "aligned"),
        (lambda: gemm(torch.randn(2, 3), torch.randn(3, 2), CONFIGS["persistent"], c="c", beta=1.0), "torch.Tensor"),
    ],
)
def test_bad_input_errors(call, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(TheodoliteError, match=message):
        call()
    assert issubclass(ConfigError, TheodoliteError)


def test_splitk_cooperative_launch_with_epilogue() -> None:
    """A deep split whose grid fits the device (the interpreter's 16 SMs here) may reduce cooperatively; the
    interpreter runs programs one after another, so its launch never spins (the last slice to arrive reduces,
    through the same reduction code): right with alpha, beta*C and a bias, every tile written."""
    from theodolite.kernels import plan_gemm
    from theodolite.kernels.config import cooperative_reduction

    config = GemmConfig.from_key("splitk/64x64x128/g8/w4/s4/k8")
    assert cooperative_reduction(config, 2, 16)
    a = operand(50, 1100, False, torch.float16)  # 2 tiles x 8 slices = 16 programs; 9 K-steps (slices of 2: 3 empty)
    b = operand(1100, 100, True, torch.float16)
    c = operand(50, 100, False, torch.float16)
    bias = torch.randn(100).to(torch.float16)
    step = plan_gemm(a, b, config, c=c, bias=bias).steps[-1]
    assert step.kwargs["SPIN"] is False
    out = run(a, b, config, alpha=0.5, beta=2.0, c=c, bias=bias)
    check(out, a, b, torch.float16, alpha=0.5, beta=2.0, c=c, bias=bias)


COMPOSITE = GemmConfig("tma", 16, 16, 16, 2, 4, 2, block_n1=16)  # a 16 x (16 + 16) output tile


@pytest.mark.parametrize("host", ["1", "0"])
@pytest.mark.parametrize("layout", ["nn", "nt", "tn", "tt"])
def test_composite_tiles_every_layout(monkeypatch: pytest.MonkeyPatch, layout: str, host: str) -> None:
    """A composite TMA tile (two B parts, each with its own epilogue), host-made or in-kernel descriptors: every
    output element written (NaN-poisoned first) and right with alpha, beta*C and a column bias, where the last tile
    column ends in the first part (N = 40) and in the second (N = 56)."""
    monkeypatch.setenv("THEODOLITE_TMA_HOST_DESC", host)
    for n in (40, 56):
        m, k = 20, 52
        a = operand(m, k, layout[0] == "t", torch.float32)
        b = operand(k, n, layout[1] == "t", torch.float32)
        c = torch.randn(m, n)
        bias = torch.randn(n)
        out = run(a, b, COMPOSITE, alpha=0.5, beta=2.0, c=c, bias=bias)
        check(out, a, b, torch.float32, alpha=0.5, beta=2.0, c=c, bias=bias)
    step = plan_gemm(a, b, COMPOSITE).steps[-1]
    assert step.kwargs["BLOCK_N1"] == 16 and step.kwargs["num_tiles"] == 2 * 2  # 20 x 56 in 16 x 32 tiles
    if host == "1":
        boxes = [x.block_shape for x in (step.args[1], step.args[7])]
        assert sorted(boxes) == [[16, 16], [16, 16]] and type(step.args[7]).__name__ == "TensorDescriptor"


def test_composite_tiles_batched_and_copied(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batched (3-D descriptors) and with a misaligned B that the copy rule pads first."""
    import theodolite.kernels.config as config_module

    monkeypatch.setenv("THEODOLITE_TMA_HOST_DESC", "1")
    a = operand(20, 48, False, torch.float32, batch=3)
    b = operand(48, 40, True, torch.float32, batch=3)
    check(run(a, b, COMPOSITE), a, b, torch.float32)
    monkeypatch.setattr(config_module, "ALIGN_COPY_MIN_FLOPS", 0.0)
    monkeypatch.setattr(config_module, "ALIGN_COPY_MIN_REUSE", 1)
    a2, b2 = operand(24, 36, False, torch.float16), operand(36, 45, False, torch.float16)  # B's rows: 90 bytes
    check(run(a2, b2, COMPOSITE), a2, b2, torch.float16)
    sources = plan_gemm(a2, b2, COMPOSITE).steps[-1].sources
    assert sources[1] is None and sources[7] is None  # both B parts' descriptors over the padded copy
