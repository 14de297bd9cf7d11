"""What does writing a GEMM's output cost, by the output's size?

Many waves of one K-step write their output at about 2.1 TB/s on the H200 whatever the tile (calibrate's tile probe:
64x64 tiles four per SM, 32 MB in 16.3 us; `experiments/epilogue_tiles.py`: 128x128 two per SM and 128x256 one per
SM, the same 32 MB in 15-16 us; torch.matmul 15.3 us), against 4.68 TB/s for the write probe's 1 GiB fill and 4.39
for its tile-by-tile write.  This times, L2-flushed by a read as ``validate`` times large shapes, outputs of 8 MB to
1 GiB written four ways side by side: torch's fill, the write probe's tile-by-tile kernel (``probes.stream``), and
GEMMs with K = 64 (torch.matmul; one flattened TMA 128x256 config of ours).  Each time is less the events' bracket
(an empty launch's flushed time over its graph-replayed one), as ``model.evaluate`` reads flushed times.  Run on a
GPU from the repository root (writes ``$OUT/write-size-<gpu>.json``)::

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/write_size.py
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch
from theodolite.kernels.benchmark import Timer, timing_floors
from theodolite.kernels.config import GemmConfig
from theodolite.kernels.launch import plan_gemm
from theodolite.probes.stream import TileWrite, launch_tile_write

COLS = 8192
SIZES_MB = (8, 16, 32, 64, 128, 256, 1024)  # 2-byte outputs, COLS wide
K = 64
OURS = "tma/128x256x64/g8/w8/s3/k1/f"


def main() -> int:
    name = torch.cuda.get_device_name()
    gpu = "h200" if "H200" in name else "h100" if "H100" in name else name.replace(" ", "-").lower()
    timer = Timer()
    floors = timing_floors(timer)
    bracket = floors["flushed_ms"] - floors["graph_ms"]
    rows = []
    for mb in SIZES_MB:
        m = mb * 2**20 // (2 * COLS)
        out = torch.empty(m, COLS, device="cuda", dtype=torch.bfloat16)
        a = torch.randn(m, K, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(K, COLS, device="cuda", dtype=torch.bfloat16)
        plan = plan_gemm(a, b, GemmConfig.from_key(OURS), out=out)
        plan.run()
        torch.testing.assert_close(out.float(), (a.float() @ b.float()), rtol=2e-2, atol=5e-2)
        ways = {
            "fill": lambda out=out: out.fill_(1.5),
            "tile_write": lambda out=out: launch_tile_write(out, TileWrite()),
            "torch_matmul": lambda a=a, b=b, out=out: torch.matmul(a, b, out=out),
            OURS: plan.run,
        }
        for fn in ways.values():
            fn()
        times = timer.flushed_interleaved(list(ways.values()))
        row = {"rows": m, "cols": COLS, "out_bytes": m * COLS * 2, "k": K}
        for way, ms in zip(ways, times, strict=True):
            row[way + "_us"] = (float(ms) - bracket) * 1e3
        rows.append(row)
        print(f"{mb:5d} MB " + " ".join(f"{w} {row[w + '_us']:7.1f} us ({row['out_bytes'] / row[w + '_us'] / 1e6:4.2f} "
                                        f"TB/s)" for w in ways), flush=True)  # fmt: skip
    out_path = Path(os.environ.get("OUT", ".")) / f"write-size-{gpu}.json"
    out_path.write_text(json.dumps({"meta": {"device": name, "timing_floor": floors}, "rows": rows}, indent=1))
    print(f"wrote {out_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
