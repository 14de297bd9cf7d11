"""Small M, short K: do the rows a tile wraps past M (``% LM``) cost L2 time the model does not price?

A tile of BLOCK_M rows on a problem of M < BLOCK_M rows loads its A rows modulo M: every tile reads BLOCK_M x K
elements of A, all from the M x K elements that exist.  When M x K is a few hundred bytes, every SM's requests
land on the same few L2 lines (one slice each).  Sweeps show such configs 2-6x slower than their predictions
(H100, 2x7487x184 nn: persistent/128x32x64 39.6 us against 6.7 us for 16x64x128, predicted 4.9 and 5.3).

Two measurements, side by side in one process:
1. a hot-set read: every SM (4 programs each) reads a working set of W bytes over and over with ``.cg`` loads
   (past L1), W from 128 B to 4 MB: the L2 bandwidth a set of W bytes is served at;
2. decode-like and narrow-N shapes with tall and short tiles under several edge rules
   (``kernels.config.MASKED_EDGES``, ``HOT_ROWS_MODES``): "config" (the rule before the launch masked a dimension
   shorter than its tile), "rule" (today's) and "all" (every edge of every tile masked), torch.matmul beside them.

``hot-rows-h100.json`` (H100) was run before the launch's rule changed, with modes "rule" and "all": its "@rule"
rows are today's "@config".  Masking removed the tall tiles' penalty (2x7487x184: persistent/128x32x64 37.7 us
wrapped, 7.1 masked; 16x64x128 6.5 and 5.4; 1x8072x3264: 194.9 and 28.3, 16x64x128 28.6 and 21.1 against
torch.matmul's 20.7), while masking every edge of every tile cost others 1.2-2x (8x113973x32, and 2x128x11981
whose odd K makes both operands element-wise); hence the rule masks a dimension only where it is shorter than the
tile.  Its hot-set rows at 4 KB and less are void: the loads of a
set that small repeated every iteration and were hoisted out of the loop (fixed since, not re-run); from 16 KB up
the set was read at 8.3-10.4 TB/s, no slower than the 2 MB+ sweep's 7.4, so this probe found no L2 slice hot spot.

Run on a GPU from the repository root (writes ``$OUT/hot-rows-<gpu>.json``)::

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/hot_rows.py
"""

import os

import torch
import triton
import triton.language as tl
from harness import gpu_name, rotated_inputs, write_rows
from theodolite.kernels import config as kernel_config
from theodolite.kernels.benchmark import Timer
from theodolite.kernels.config import GemmConfig
from theodolite.kernels.launch import plan_gemm

FOOTPRINTS = [128, 256, 512, 1024, 2048, 4096, 16384, 65536, 262144, 1 << 20, 4 << 20]
BLOCK = 1024  # int32 per program per iteration: 4 KB, two 16-byte loads a thread
ITERS = 256


@triton.jit(do_not_specialize=["step"])
def hot_read(src, out, step, W: tl.constexpr, ITERS: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.int32)
    start = (pid * BLOCK) % W
    for i in range(ITERS):  # a runtime step: the compiler cannot hoist a load whose offsets repeat
        offs = (start + i * step + tl.arange(0, BLOCK)) % W
        offs = tl.max_contiguous(tl.multiple_of(offs, 4), 4)
        acc += tl.load(src + offs, cache_modifier=".cg")
    tl.store(out + pid * BLOCK + tl.arange(0, BLOCK), acc)


def hot_set(timer: Timer) -> list[dict]:
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    programs = sms * 4
    src = torch.randint(0, 100, (max(FOOTPRINTS) // 4,), device="cuda", dtype=torch.int32)
    out = torch.empty(programs * BLOCK, device="cuda", dtype=torch.int32)
    rows = []
    for w in FOOTPRINTS:
        words = max(w // 4, 4)

        def call(words: int = words) -> None:
            hot_read[(programs,)](src, out, BLOCK + 4, W=words, ITERS=ITERS, BLOCK=BLOCK, num_warps=4)

        call()
        seconds = timer(call) * 1e-3
        rate = programs * ITERS * BLOCK * 4 / seconds
        rows.append({"footprint_bytes": w, "bytes_per_s": rate, "us": seconds * 1e6})
        print(f"hot set {w:>8d} B: {rate / 1e12:6.3f} TB/s  ({seconds * 1e6:.1f} us)")
    return rows


SHAPES = {  # (M, N, K, layout); wide*: wide:300:673676, whose sweep showed the defect; llm decode in nt
    "wide128": (2, 7487, 184, "nn"), "wide128-n7488": (2, 7488, 184, "nn"), "wide128-k4096": (2, 7487, 4096, "nn"),
    "wide128-m16": (16, 7487, 184, "nn"), "wide128-m64": (64, 7487, 184, "nn"), "wide155": (3, 18337, 80, "nt"),
    "wide119": (1, 215, 40, "nt"), "8x113973x32": (8, 113973, 32, "nt"), "2x19264x64": (2, 19264, 64, "nt"),
    "1x8072x3264": (1, 8072, 3264, "nn"), "wide124": (128, 28, 60928, "nt"), "64x26x508": (64, 26, 508, "nn"),
    "20x25x6656": (20, 25, 6656, "nn"), "9x22x417": (9, 22, 417, "nt"), "3x24x16197": (3, 24, 16197, "nn"),
    "llm-1x4096x4096": (1, 4096, 4096, "nt"), "llm-8x14336x4096": (8, 14336, 4096, "nt"),
    "llm-32x6144x4096": (32, 6144, 4096, "nt"), "llm-64x28672x4096": (64, 28672, 4096, "nt"),
    "llm-16x4096x14336": (16, 4096, 14336, "nt"), "llm-100x4096x4096": (100, 4096, 4096, "nt"),
}  # fmt: skip
CONFIGS = [
    "persistent/16x64x128/g8/w4/s4/k1", "persistent/32x128x64/g8/w4/s4/k1", "persistent/64x32x128/g8/w4/s4/k1",
    "persistent/64x128x64/g8/w4/s4/k1", "persistent/128x32x64/g8/w4/s4/k1", "persistent/128x128x64/g8/w8/s4/k1/f",
    "splitk/16x64x128/g8/w4/s4/k4", "splitk/64x64x128/g8/w4/s4/k8", "streamk/128x128x64/g8/w8/s4/k1",
    "tma/64x128x64/g8/w4/s4/k1",
]  # fmt: skip
MODES = tuple(os.environ.get("HOT_ROWS_MODES", "config,rule").split(","))


def shapes(timer: Timer) -> list[dict]:
    device = torch.device("cuda")
    rows = []
    for name, (m, n, k, layout) in SHAPES.items():
        sets, calls, ref = rotated_inputs(m, n, k, timer, device, layout)
        out = sets[0][2]
        for key in CONFIGS:
            for mode in MODES:
                if mode != MODES[0] and key.startswith("tma"):
                    continue  # TMA bounds its own loads
                kernel_config.MASKED_EDGES = mode
                out.fill_(float("nan"))
                try:
                    plans = [plan_gemm(x, y, GemmConfig.from_key(key), out=o) for x, y, o in sets]
                    plans[0].run()
                except Exception as error:  # not legal for this shape
                    print(name, key, mode, type(error).__name__, str(error)[:80])
                    continue
                err = ((out.float() - ref).abs().max() / ref.abs().max().clamp_min(1e-30)).item()
                if not err < 1e-2:
                    print(name, key, mode, "WRONG RESULT", err)
                    continue
                calls[f"{key}@{mode}"] = [p.run for p in plans]
        kernel_config.MASKED_EDGES = "rule"
        keys = list(calls)
        times = timer.interleaved([calls[c] for c in keys], keep=range(len(keys)))
        for c, t in zip(keys, times, strict=True):
            rows.append({"shape": name, "M": m, "N": n, "K": k, "layout": layout, "config": c, "us": t * 1e3})
        short = [c.replace("/g8", "").replace("/k1", "").replace("persistent/", "p/") for c in keys]
        print(f"{name:14s} " + "  ".join(f"{c}:{t * 1e3:.1f}" for c, t in zip(short, times, strict=True)))
        tma = [t for c, t in zip(keys, times, strict=True) if c.startswith("tma")]
        best = {mode: min([t for c, t in zip(keys, times, strict=True) if c.endswith("@" + mode)] + tma, default=0.0)
                for mode in MODES}  # fmt: skip
        line = "  ".join(f"best {m} {best[m] * 1e3:.1f}" for m in MODES)
        print(f"{'':14s} {line}  torch {times[0] * 1e3:.1f}")
        del sets, calls
    return rows


def main() -> None:
    timer = Timer()
    hot = hot_set(timer)
    rows = shapes(timer)
    command = __doc__.split("\n\n")[-1].strip()
    path = write_rows(f"hot-rows-{gpu_name()}", command, rows, hot_set=hot)
    print("wrote", path)


if __name__ == "__main__":
    main()
