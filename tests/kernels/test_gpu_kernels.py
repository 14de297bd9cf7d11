"""GPU tests of the compiled kernels (marker ``gpu``): bf16/fp16, tf32/ieee fp32, fp8 with scales, huge shapes.

Relative error is max |out - ref| / max |ref| against a float64 reference on fresh random data.
"""

from __future__ import annotations

import pytest
from theodolite.kernels.config import cooperative_reduction

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu
TOL = {"fp16": 1e-2, "bf16": 1e-2, "tf32": 1e-3, "fp32": 1e-5, "fp8": 1e-2}
TORCH = {"fp16": torch.float16, "bf16": torch.bfloat16, "tf32": torch.float32, "fp32": torch.float32}


def _kernels():  # type: ignore[no-untyped-def]
    import theodolite.kernels as kernels  # imported lazily: the interpreter tests set TRITON_INTERPRET first

    return kernels


def configs() -> dict[str, object]:
    k = _kernels()
    return {
        "persistent": k.GemmConfig("persistent", 128, 128, 64, 8, 8, 3),
        "streamk": k.GemmConfig("streamk", 128, 128, 64, 8, 8, 4),
        "splitk": k.GemmConfig("splitk", 64, 64, 64, 8, 4, 3, 4),
        "tma": k.GemmConfig("tma", 128, 128, 64, 8, 8, 3),
        "small": k.GemmConfig("persistent", 16, 64, 64, 8, 4, 4),
    }


def operand(rows: int, cols: int, transposed: bool, dtype: torch.dtype, scale: float = 1.0) -> torch.Tensor:
    shape = (cols, rows) if transposed else (rows, cols)
    x = (torch.randn(shape, device="cuda") * scale).to(dtype)
    return x.t() if transposed else x


def rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """Largest element error over the largest reference element."""
    assert not torch.isnan(out).any()
    return ((out.double() - ref).abs().max() / ref.abs().max().clamp_min(1e-12)).item()


def normwise_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """||out - ref|| / ||ref|| (Frobenius): the relative error of the whole result."""
    assert not torch.isnan(out).any()
    return (torch.linalg.norm(out.double() - ref) / torch.linalg.norm(ref).clamp_min(1e-12)).item()


# Every layout and dtype through the persistent kernel, the other variants on a subset (compiles cost ~1 s each).
CASES = [
    ("persistent", dtype, layout) for dtype in ("fp16", "bf16", "tf32", "fp32") for layout in ("nn", "nt", "tn", "tt")
]
CASES += [(variant, "bf16", layout) for variant in ("streamk", "splitk", "tma", "small") for layout in ("nn", "tt")]
CASES += [(variant, dtype, "nt") for variant in ("streamk", "splitk", "tma") for dtype in ("tf32", "fp32")]


@pytest.mark.parametrize(("variant", "dtype", "layout"), CASES)
@pytest.mark.parametrize("shape", [(1000, 1008, 520), (17, 33, 1024), (2, 7487, 184)])
def test_dtypes_variants_layouts(dtype: str, variant: str, layout: str, shape: tuple[int, int, int]) -> None:
    k = _kernels()
    m, n, kk = shape
    a = operand(m, kk, layout[0] == "t", TORCH[dtype])
    b = operand(kk, n, layout[1] == "t", TORCH[dtype])
    config = configs()[variant]
    problem = k.problem_of(a, b, precision="ieee" if dtype == "fp32" else None)
    reason = k.legality(config, problem, k.device_limits(a.device))
    if reason is not None:
        pytest.skip(reason)
    out = torch.full((m, n), float("nan"), device="cuda", dtype=TORCH[dtype])
    k.gemm(a, b, config, out=out, precision="ieee" if dtype == "fp32" else None)
    ref = a.double() @ b.double()
    if dtype != "tf32":
        assert rel_error(out, ref) <= TOL[dtype]
        return
    # tf32: the tensor cores take fp32 operands truncated to 10 mantissa bits, so the result's error sits near 8e-4
    # (H100, six draws each of 17x33x1024 and 1000x1008x520: normwise 7.4-8.0e-4, largest element over largest
    # 6.7-9.1e-4; H200 runs crossed 1e-3 element-wise by 1-2%).  The bound holds for the whole result; an element
    # may reach 1.5x it.  (torch.matmul in tf32: 2.9e-4 normwise on the same draws; experiments' tf32_error.py.)
    assert normwise_error(out, ref) <= TOL[dtype]
    assert rel_error(out, ref) <= 1.5 * TOL[dtype]


@pytest.mark.parametrize("fp8", ["e4m3", "e5m2"])
@pytest.mark.parametrize("layout", ["nt", "nn"])
@pytest.mark.parametrize("variant", ["persistent", "tma", "streamk", "splitk"])
def test_fp8_with_scales(fp8: str, layout: str, variant: str) -> None:
    k = _kernels()
    if torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("fp8 needs sm_89+")
    dtype = torch.float8_e4m3fn if fp8 == "e4m3" else torch.float8_e5m2
    m, n, kk = 256, 384, 512
    a = operand(m, kk, False, dtype)
    b = operand(kk, n, layout[1] == "t", dtype)
    config = k.GemmConfig(variant, 128, 128, 128, 8, 8, 3, 4 if variant == "splitk" else 1)
    problem = k.problem_of(a, b)
    reason = k.legality(config, problem, k.device_limits(a.device))
    if reason is not None:
        pytest.skip(reason)
    sa, sb = torch.tensor(0.5, device="cuda"), 3.0
    out = k.gemm(a, b, config, a_scale=sa, b_scale=sb, out_dtype=torch.float32)
    ref = (a.double() * 0.5) @ (b.double() * 3.0)
    assert rel_error(out, ref) <= TOL["fp8"]
    # the launch cache's call: two scale tensors, one updated in place, each read anew
    from theodolite.kernels import launch

    sb_t = torch.tensor([3.0], device="cuda")
    for value in (0.5, 2.0):
        sa.fill_(value)
        out = k.gemm(a, b, config, a_scale=sa, b_scale=sb_t, out_dtype=torch.float32)
        assert rel_error(out, (a.double() * value) @ (b.double() * 3.0)) <= TOL["fp8"], value
    key = launch._fast_key(a, b, config, None, 1.0, 0.0, None, None, torch.float32, None, sa, sb_t, None)
    assert key in launch._FAST


def test_matmul_runner_with_two_scales_in_a_cuda_graph() -> None:
    """theodolite.matmul's repeat takes its runner (two scale pointers, no product launch): eager and captured in a
    CUDA graph, a scale updated in place between replays is read anew."""
    if torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("fp8 needs sm_89+")
    from theodolite import api

    api.clear_caches()
    x = (torch.randn(8, 4096, device="cuda") / 4).to(torch.float8_e4m3fn)
    w = (torch.randn(1024, 4096, device="cuda") / 4).to(torch.float8_e4m3fn)
    sa, sb = torch.tensor(0.5, device="cuda"), torch.tensor([3.0], device="cuda")
    ref = x.double() @ w.double().t()
    for _ in range(2):
        out = api.matmul(x, w.t(), scale_a=sa, scale_b=sb)
        assert out.dtype == torch.bfloat16 and rel_error(out, ref * 1.5) <= TOL["bf16"]
    assert api._MATMUL_RUNNERS
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = api.matmul(x, w.t(), scale_a=sa, scale_b=sb)
    for value in (0.5, 2.0):
        sa.fill_(value)
        graph.replay()
        torch.cuda.synchronize()
        assert rel_error(captured, ref * value * 3.0) <= TOL["bf16"], value
    api.clear_caches()


@pytest.mark.parametrize(
    "key", ["persistent/64x64x128/g8/w4/s4/k1", "tma/128x128x128/g8/w8/s3/k1", "tma/128x128+32x64/g8/w8/s5/k1",
            "streamk/128x128x128/g8/w8/s3/k1", "splitk/64x64x128/g8/w4/s4/k4"],
)  # fmt: skip
def test_fp8_rowwise_scales_match_scaled_mm(key: str) -> None:
    """Rowwise scales (scale_a [M, 1], scale_b [1, N]) against torch._scaled_mm's rowwise call on the same operands:
    bf16 output within bf16 rounding of it, on a shape whose edge tiles are partial; then matmul's runner captured in
    a CUDA graph, a scale row updated in place between replays."""
    k = _kernels()
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("torch._scaled_mm's rowwise scales need sm_90")
    from theodolite import api

    m, n, kk = 300, 528, 1024  # torch._scaled_mm wants N and K multiples of 16; the edge tiles stay partial
    a = (torch.randn(m, kk, device="cuda") / 4).to(torch.float8_e4m3fn)
    w = (torch.randn(n, kk, device="cuda") / 4).to(torch.float8_e4m3fn)
    sa = torch.rand(m, 1, device="cuda") + 0.5
    sb = torch.rand(1, n, device="cuda") + 0.5
    config = k.GemmConfig.from_key(key)
    reason = k.legality(config, k.problem_of(a, w.t()), k.device_limits(a.device))
    if reason is not None:
        pytest.skip(reason)
    ref = torch._scaled_mm(a, w.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
    exact = (a.double() @ w.double().t()) * sa.double() * sb.double()
    out = k.gemm(a, w.t(), config, a_scale=sa, b_scale=sb)
    assert out.dtype == torch.bfloat16 and rel_error(out, exact) <= TOL["bf16"] and rel_error(ref, exact) <= TOL["bf16"]
    assert rel_error(out, ref.double()) <= 2 * TOL["bf16"]
    api.clear_caches()
    for _ in range(2):
        api.matmul(a, w.t(), scale_a=sa, scale_b=sb)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = api.matmul(a, w.t(), scale_a=sa, scale_b=sb)
    sa[7] = 4.0
    graph.replay()
    torch.cuda.synchronize()
    exact = (a.double() @ w.double().t()) * sa.double() * sb.double()
    assert rel_error(captured, exact) <= TOL["bf16"]
    api.clear_caches()


def test_epilogue_and_batch_bf16() -> None:
    k = _kernels()
    a = torch.randn(3, 300, 520, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(3, 520, 264, device="cuda", dtype=torch.bfloat16)
    c = torch.randn(3, 300, 264, device="cuda", dtype=torch.bfloat16)
    bias = torch.randn(264, device="cuda", dtype=torch.bfloat16)
    for variant in ("persistent", "streamk", "splitk", "tma"):
        out = k.gemm(a, b, configs()[variant], alpha=0.5, beta=2.0, c=c, bias=bias)
        ref = 0.5 * (a.double() @ b.double()) + 2.0 * c.double() + bias.double()
        assert rel_error(out, ref) <= TOL["bf16"], variant


def test_misaligned_3000x1500x7000() -> None:
    k = _kernels()
    a = operand(3000, 7000, False, torch.bfloat16)
    b = operand(7000, 1500, False, torch.bfloat16)
    assert k.needs_aligned_copy(k.problem_of(a, b)) == (False, True)
    for variant in ("persistent", "tma", "streamk"):
        out = k.gemm(a, b, configs()[variant])
        assert rel_error(out, a.double() @ b.double()) <= TOL["bf16"], variant


def test_deterministic_reductions() -> None:
    k = _kernels()
    a = operand(64, 8192, False, torch.bfloat16)
    b = operand(8192, 512, False, torch.bfloat16)
    for variant in ("streamk", "splitk"):
        first = k.gemm(a, b, configs()[variant])
        for _ in range(3):
            assert torch.equal(first, k.gemm(a, b, configs()[variant])), variant
    # one-launch split-K: the last program of a tile to arrive reduces; many tiles and slices race here
    config = k.GemmConfig("splitk", 16, 64, 128, 8, 4, 4, 16)
    a = operand(40, 8192, False, torch.bfloat16)
    b = operand(8192, 4096, False, torch.bfloat16)
    first = k.gemm(a, b, config)
    assert rel_error(first, a.double() @ b.double()) <= TOL["bf16"]
    for _ in range(20):
        assert torch.equal(first, k.gemm(a, b, config))


def test_more_than_2_31_elements() -> None:
    k = _kernels()
    free = torch.cuda.mem_get_info()[0]
    if free < 24 * 2**30:
        pytest.skip("needs ~24 GiB free")
    # output of 2^31 elements
    a = operand(65536, 64, False, torch.bfloat16)
    b = operand(64, 32768, False, torch.bfloat16)
    out = k.gemm(a, b, configs()["persistent"])
    for rows in (slice(0, 256), slice(65536 - 256, 65536)):
        ref = a[rows].double() @ b.double()
        assert rel_error(out[rows], ref) <= TOL["bf16"]
    del out
    # an A operand of 2^31 elements
    a = operand(2**25, 64, False, torch.bfloat16)
    b = operand(64, 16, False, torch.bfloat16)
    out = k.gemm(a, b, configs()["small"])
    for rows in (slice(0, 1024), slice(2**25 - 1024, 2**25)):
        assert rel_error(out[rows], a[rows].double() @ b.double()) <= TOL["bf16"]


@pytest.mark.parametrize("layout", ["nn", "tn"])
def test_element_wise_offsets_at_their_int32_bound(layout: str) -> None:
    """An element-wise A whose row stride is one element short of SCALAR_OFFSET_MAX_ROW (odd: misaligned), a view
    into an 8.6 GB buffer: read in place (not copied), its int32 offsets inside a tile reach 255 x (2^23 - 1) + 63
    (256-row tiles, row-major A) or 127 x (2^23 - 1) + 127 (column-major A, 128-deep K-steps), just under 2^31, and
    its last tiles start past 2^31 elements (64-bit tile bases).  K stays short: the float64 reference is exact."""
    k = _kernels()
    if torch.cuda.mem_get_info()[0] < 24 * 2**30:
        pytest.skip("needs ~24 GiB free")
    from theodolite.kernels.config import SCALAR_OFFSET_MAX_ROW

    ld, rows, used = SCALAR_OFFSET_MAX_ROW - 1, 513, 300
    storage = torch.empty((rows, ld), dtype=torch.bfloat16, device="cuda")
    storage[:, :used] = torch.randn((rows, used), device="cuda").to(torch.bfloat16)
    a = storage[:, :used] if layout == "nn" else storage[:, :used].t()  # (513 x 300) or (300 x 513), stride ld
    b = operand(a.shape[1], 16, False, torch.bfloat16)
    problem = k.problem_of(a, b)
    assert not problem.a_aligned and problem.layout == layout
    config = (
        k.GemmConfig("persistent", 256, 16, 64, 8, 8, 2)
        if layout == "nn"
        else k.GemmConfig("persistent", 64, 16, 128, 8, 4, 2)
    )
    plan = k.plan_gemm(a, b, config)
    assert len(plan.steps) == 1  # no aligned copy: the kernel reads the view in place
    assert rel_error(plan.run(), a.double() @ b.double()) <= TOL["bf16"]


def test_fast_launch_matches() -> None:
    """A plan's repeat runs launch the compiled kernel directly: same results as its first (Triton) run."""
    k = _kernels()
    a = operand(300, 520, False, torch.bfloat16)
    b = operand(520, 264, False, torch.bfloat16)
    for variant in ("persistent", "streamk", "splitk", "tma"):
        plan = k.plan_gemm(a, b, configs()[variant])
        first = plan.run().clone()
        plan.out.fill_(float("nan"))
        second = plan.run()  # the direct path
        assert torch.equal(first, second), variant


@pytest.mark.parametrize("variant", ["persistent", "streamk", "splitk", "tma", "small"])
def test_gemm_launch_cache_rebinds(variant: str) -> None:
    """Repeated gemm() calls hit the launch cache and must use each call's tensors (new data, new out)."""
    from theodolite.kernels import launch

    k = _kernels()
    config = configs()[variant]
    m, n, kk = 300, 264, 520
    bias = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    c = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
    for round_ in range(3):
        a = operand(m, kk, False, torch.bfloat16)
        b = operand(kk, n, round_ == 2, torch.bfloat16)  # round 2: new layout, a new cache entry
        out = k.gemm(a, b, config)
        assert rel_error(out, a.double() @ b.double()) <= TOL["bf16"], (variant, round_)
        given = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        result = k.gemm(a, b, config, out=given, alpha=0.5, beta=2.0, c=c, bias=bias)
        assert result is given
        ref = 0.5 * (a.double() @ b.double()) + 2.0 * c.double() + bias.double()
        assert rel_error(given, ref) <= TOL["bf16"], (variant, round_)
    assert len(launch._FAST) > 0


def test_gemm_launch_cache_misaligned_and_views(monkeypatch: pytest.MonkeyPatch) -> None:
    """Repeated calls with an aligned copy (served by the launch cache, the copy re-bound to each call's
    operand) and offset views (different cache entries) stay correct."""
    import theodolite.kernels.config as config_module
    from theodolite.kernels import launch

    monkeypatch.setattr(config_module, "ALIGN_COPY_MIN_FLOPS", 0.0)
    k = _kernels()
    config = configs()["persistent"]
    for round_ in range(3):
        a = operand(200, 1001, round_ == 1, torch.bfloat16)  # misaligned rows: copied (round 1: column-major)
        b = operand(1001, 300, False, torch.bfloat16)
        assert rel_error(k.gemm(a, b, config), a.double() @ b.double()) <= TOL["bf16"], round_
        key = launch._fast_key(a, b, config, None, 1.0, 0.0, None, None, None, None, None, None, None)
        assert key in launch._FAST and launch._FAST[key].copies, round_
        base = torch.randn(129 * 256 + 8, device="cuda", dtype=torch.bfloat16)
        for offset in (0, 8, 1):  # pointer alignment changes: different cache entries
            x = base[offset : offset + 128 * 256].view(128, 256)
            y = operand(256, 192, False, torch.bfloat16)
            assert rel_error(k.gemm(x, y, config), x.double() @ y.double()) <= TOL["bf16"], offset


@pytest.mark.parametrize(
    ("m", "n", "kk"),
    [(1200, 2200, 4096), (640, 896, 10240), (419, 40, 9016), (128, 4096, 4096)],  # a wave + split tail; tails only
)
def test_streamk_split_tails(m: int, n: int, kk: int) -> None:
    """The tail's slices wait for each other and reduce row chunks (SPIN): exact against the last-arriver sum
    order (deterministic across runs), with bias and beta*C through the chunked epilogue."""
    k = _kernels()
    config = k.GemmConfig("streamk", 128, 128, 64, 8, 8, 4) if n > 64 else k.GemmConfig("streamk", 64, 64, 64, 8, 4, 4)
    a = operand(m, kk, False, torch.bfloat16)
    b = operand(kk, n, False, torch.bfloat16)
    c = operand(m, n, False, torch.bfloat16)
    bias = torch.randn(n, device="cuda").to(torch.bfloat16)
    plan = k.plan_gemm(a, b, config, beta=0.5, c=c, bias=bias)
    assert plan.steps[-1].kwargs["split"] > 1
    first = plan.run().clone()
    ref = a.double() @ b.double() + 0.5 * c.double() + bias.double()
    assert rel_error(first, ref) <= TOL["bf16"]
    for _ in range(5):
        assert torch.equal(first, plan.run())


@pytest.mark.parametrize(
    ("key", "m", "n", "kk"),
    [
        ("splitk/128x256x64/g8/w8/s3/k8", 200, 1000, 4100),
        ("splitk/64x128x64/g8/w4/s4/k16", 200, 1000, 4100),
        ("splitk/128x128x64/g8/w8/s3/k4", 200, 1000, 4100),
        # the space's deepest splits, on a few tiles over a long, odd K (element-wise loads; slices past K are empty)
        ("splitk/16x64x128/g8/w4/s4/k32", 19, 127, 14455),
        ("splitk/16x64x128/g8/w4/s4/k64", 19, 127, 14455),
        # cooperative reductions (config.cooperative_reduction: every slice reduces a share after all arrived)
        ("splitk/64x64x128/g8/w4/s4/k8", 130, 200, 5000),
        ("splitk/32x128x64/g8/w4/s4/k8", 70, 300, 3001),
    ],
)
def test_deep_splitk_with_epilogue(key: str, m: int, n: int, kk: int) -> None:
    """Deep splits (their reduction loops over the slices, not unrolled): right with beta*C and bias on a ragged
    shape, and bit-identical across runs whichever slice arrives last."""
    k = _kernels()
    config = k.GemmConfig.from_key(key)
    a = operand(m, kk, False, torch.bfloat16)
    b = operand(kk, n, False, torch.bfloat16)
    c = operand(m, n, False, torch.bfloat16)
    bias = torch.randn(n, device="cuda").to(torch.bfloat16)
    first = k.gemm(a, b, config, beta=0.5, c=c, bias=bias).clone()
    ref = a.double() @ b.double() + 0.5 * c.double() + bias.double()
    assert rel_error(first, ref) <= TOL["bf16"]
    for _ in range(5):
        assert torch.equal(first, k.gemm(a, b, config, beta=0.5, c=c, bias=bias))
    tiles = -(-m // config.block_m) * -(-n // config.block_n)
    coop = k.plan_gemm(a, b, config, beta=0.5, c=c, bias=bias).steps[-1].kwargs["SPIN"]
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    assert coop == cooperative_reduction(config, tiles, sms)


@pytest.mark.parametrize("layout", ["nn", "tt"])
def test_tma_host_descriptors_launch_cache(monkeypatch: pytest.MonkeyPatch, layout: str) -> None:
    """THEODOLITE_TMA_HOST_DESC=1: descriptors made by plan_gemm, re-made over each call's operands by the launch
    cache (new data each round) and encoded once per operand, batched too; the same results as in-kernel ones."""
    from theodolite.kernels import launch

    monkeypatch.setenv("THEODOLITE_TMA_HOST_DESC", "1")
    launch._FAST.clear()
    k = _kernels()
    config = configs()["tma"]
    m, n, kk = 304, 264, 520  # every stored row a multiple of 16 bytes, whichever dimension it runs along
    for round_ in range(3):
        a = operand(m, kk, layout[0] == "t", torch.bfloat16)
        b = operand(kk, n, layout[1] == "t", torch.bfloat16)
        out = k.gemm(a, b, config)
        assert rel_error(out, a.double() @ b.double()) <= TOL["bf16"], round_
    key = launch._fast_key(a, b, config, None, 1.0, 0.0, None, None, None, None, None, None, None)
    slots = launch._FAST[key].launches[-1][2]
    assert any(isinstance(source, launch._Descriptor) for _, source in slots)
    # the same operands again: their tensor maps come from the cache of encoded descriptors, not encoded anew
    encoded = len(launch._ENCODED)
    assert encoded >= 2
    again = k.gemm(a, b, config)
    assert len(launch._ENCODED) == encoded and torch.equal(again, out)
    monkeypatch.setenv("THEODOLITE_TMA_HOST_DESC", "0")
    assert torch.equal(out, k.plan_gemm(a, b, config).run())  # in-kernel descriptors: the same bits
    monkeypatch.setenv("THEODOLITE_TMA_HOST_DESC", "1")
    a3 = torch.randn(3, 96, 128, device="cuda", dtype=torch.bfloat16)
    b3 = torch.randn(3, 128, 72, device="cuda", dtype=torch.bfloat16)
    assert rel_error(k.gemm(a3, b3, config), a3.double() @ b3.double()) <= TOL["bf16"]


@pytest.mark.parametrize("key", ["tma/128x128+32x64/g8/w8/s5/k1", "tma/128x256+64x64/g8/w8/s3/k1"])
@pytest.mark.parametrize("layout", ["nn", "nt", "tn", "tt"])
def test_composite_tiles(monkeypatch: pytest.MonkeyPatch, key: str, layout: str) -> None:
    """Composite TMA tiles (two B parts, two epilogues) in bf16: every layout on a ragged shape whose last tile column
    ends inside the first part, then inside the second, with beta*C and bias; batched; host-made and in-kernel
    descriptors give the same bits, and the launch cache re-binds the second part's descriptor."""
    from theodolite.kernels import launch

    k = _kernels()
    config = k.GemmConfig.from_key(key)
    width = config.tile_n
    for n in (2 * width + config.block_n // 2, 3 * width - 16):  # the ragged column in part 0, then in part 1
        m, kk = 264, 520
        a = operand(m, kk, layout[0] == "t", torch.bfloat16)
        b = operand(kk, n, layout[1] == "t", torch.bfloat16)
        c = operand(m, n, False, torch.bfloat16)
        bias = torch.randn(n, device="cuda").to(torch.bfloat16)
        out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        k.gemm(a, b, config, beta=0.5, c=c, bias=bias, out=out)
        ref = a.double() @ b.double() + 0.5 * c.double() + bias.double()
        assert rel_error(out, ref) <= TOL["bf16"], (n, layout)
        monkeypatch.setenv("THEODOLITE_TMA_HOST_DESC", "0")
        assert torch.equal(out, k.plan_gemm(a, b, config, beta=0.5, c=c, bias=bias).run()), (n, layout)
        monkeypatch.setenv("THEODOLITE_TMA_HOST_DESC", "1")
    launch._FAST.clear()
    for _ in range(2):  # the cached call, on new operands
        a = operand(m, kk, layout[0] == "t", torch.bfloat16)
        b = operand(kk, n, layout[1] == "t", torch.bfloat16)
        assert rel_error(k.gemm(a, b, config), a.double() @ b.double()) <= TOL["bf16"]
    a3 = torch.randn(3, 96, 128, device="cuda", dtype=torch.bfloat16)
    b3 = torch.randn(3, 128, 200, device="cuda", dtype=torch.bfloat16)
    assert rel_error(k.gemm(a3, b3, config), a3.double() @ b3.double()) <= TOL["bf16"]
