"""What a misaligned output row costs the epilogue: N = 0, 1, 2, 4 mod 8 with aligned operands.

``launch._row_vec`` promises the epilogue 16-byte rows (``OUT_VEC`` 8) or only contiguous columns (1), and ``N_VEC``
is 8 only where N is a multiple of 8: an output whose N is odd, or 2, 4 or 6 mod 8, is stored two bytes at a time.
With B stored transposed (layout nt: B's rows run along K) the operands stay aligned whatever N is, so the times of
N = base, base-1, base-2, base-4 differ by the output's stores alone (and a few percent less work).  Also: the same
output in a buffer whose rows are padded to 16 bytes (as shipped since 2026-11-26: ``OUT_VEC`` 1; and
``padded-v8``, the promise before: ``OUT_VEC`` 8 beside a per-element mask, ``N_VEC`` 1), and a column-strided output
(``OUT_VEC`` 0).  Per shape the configs below and torch.matmul, L2-flushed, side by side.  Run on a GPU from the
repository root (writes ``$OUT/store-width-<gpu>.json``)::

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/store_width.py
"""

import contextlib
import sys
from collections.abc import Iterator

BASES = ((4096, 4096, 4096), (1024, 4096, 4096), (2048, 2048, 512), (8192, 1024, 256))
OFFSETS = (0, 1, 2, 4)
CONFIGS = ("persistent/128x128x64/g8/w8/s4/k1", "persistent/128x256x64/g8/w8/s3/k1/f", "tma/128x256x64/g8/w8/s4/k1/f",
           "persistent/64x64x64/g8/w4/s4/k1")  # fmt: skip


@contextlib.contextmanager
def old_promise(on: bool) -> Iterator[None]:
    """Inside: the epilogue promised 16-byte rows beside a per-element column mask (``OUT_VEC`` 8, ``N_VEC`` 1), as
    ``launch`` did before ``_epilogue_vecs`` narrowed the promise to the mask's."""
    from theodolite.kernels import launch

    shipped = launch._epilogue_vecs
    if on:
        launch._epilogue_vecs = lambda out3, c3, n: (launch._row_vec(out3, n), 0, 1)  # type: ignore[assignment]
    try:
        yield
    finally:
        launch._epilogue_vecs = shipped  # type: ignore[assignment]


def main() -> None:
    import torch
    from harness import gpu_name, print_times, write_rows
    from theodolite.kernels.benchmark import Timer, make_inputs
    from theodolite.kernels.config import ConfigError, GemmConfig
    from theodolite.kernels.launch import plan_gemm

    device = torch.device("cuda")
    timer = Timer()
    rows = []
    for m, n0, k in BASES:
        for off in OFFSETS:
            n = n0 - off
            a, b = make_inputs(m, n, k, "bf16", "nt", device, seed=n)
            ref = torch.matmul(a.float(), b.float())
            outs = {"dense": torch.empty((m, n), device=device, dtype=torch.bfloat16)}
            if off:
                outs["padded"] = torch.empty((m, n0), device=device, dtype=torch.bfloat16)[:, :n]
                outs["padded-v8"] = outs["padded"]
            outs["strided"] = torch.empty((n, m), device=device, dtype=torch.bfloat16).t()
            calls = {"torch": lambda a=a, b=b, o=outs["dense"]: torch.matmul(a, b, out=o)}
            for key in CONFIGS:
                for way, out in outs.items():
                    try:
                        with old_promise(way == "padded-v8"):
                            plan = plan_gemm(a, b, GemmConfig.from_key(key), out=out)
                    except ConfigError as error:
                        print(key, way, "cannot run:", str(error)[:100])
                        continue
                    out.fill_(float("nan"))
                    plan.run()
                    err = ((out.float() - ref).abs().max() / ref.abs().max()).item()
                    if not err < 1e-2:
                        print(m, n, k, key, way, "wrong result", err)
                        continue
                    calls[f"{key}@{way}"] = plan.run
            torch.cuda.synchronize()
            times = dict(zip(calls, timer.flushed_interleaved(list(calls.values())), strict=True))
            for c, t in times.items():
                key, _, way = c.partition("@")
                rows.append({"M": m, "N": n, "K": k, "layout": "nt", "config": key, "out": way or "dense",
                             "us": t * 1e3})  # fmt: skip
            print_times(m, n, k, times, digits=1)
    command = "PYTHONPATH=$PWD OUT=$OUT python3 experiments/store_width.py"
    print("wrote", write_rows(f"store-width-{gpu_name()}", command, rows), file=sys.stderr)


if __name__ == "__main__":
    main()
