"""Dependent pointer chases in global memory from one chosen SM (shared by l2.py and hbm.py).

The ring stores pointers (not indices), one per 128-byte line, in a random order; loads use
``ld.global.cg`` (L1 bypassed).  Many one-warp programs are launched; only the first to arrive on
the target SM (by %smid and an atomic flag) chases.  Untimed mode returns cycles for the whole
chase (cycles/hop = latency, no per-hop overhead); timed mode also writes every hop's cycles,
with a volatile shared store of the loaded pointer between the load and the second clock read so
the clock waits for the load.
"""

from __future__ import annotations

import numpy as np
import triton
import triton.language as tl
from theodolite.probes.common import smid

LINE = 128

_UNTIMED_TEXT = """{
.reg .u64 p, t0, t1;
.reg .u32 i;
.reg .pred q;
mov.u64 p, $2;
mov.u32 i, 0;
mov.u64 t0, %clock64;
TCH_U_LOOP:
ld.global.cg.u64 p, [p];
ld.global.cg.u64 p, [p];
ld.global.cg.u64 p, [p];
ld.global.cg.u64 p, [p];
add.u32 i, i, 4;
setp.lt.u32 q, i, $3;
@q bra TCH_U_LOOP;
mov.u64 $1, p;
mov.u64 t1, %clock64;
sub.u64 $0, t1, t0;
}"""

_TIMED_TEXT = """{
.reg .u64 p, t0, t1, d, o;
.reg .u32 i, d32;
.reg .pred q;
.shared .align 8 .b8 tch_sink[8];
mov.u64 p, $2;
mov.u64 o, $4;
mov.u32 i, 0;
TCH_T_LOOP:
mov.u64 t0, %clock64;
ld.global.cg.u64 p, [p];
st.volatile.shared.u64 [tch_sink], p;
mov.u64 t1, %clock64;
sub.u64 d, t1, t0;
cvt.u32.u64 d32, d;
st.global.u32 [o], d32;
add.u64 o, o, 4;
add.u32 i, i, 1;
setp.lt.u32 q, i, $3;
@q bra TCH_T_LOOP;
mov.u64 $1, p;
mov.u64 $0, 0;
}"""


_UNTIMED = tl.constexpr(_UNTIMED_TEXT)
_TIMED = tl.constexpr(_TIMED_TEXT)


@triton.jit
def chase_kernel(start_ptr, out_ptr, hop_ptr, flag_ptr, target_sm, n_hops, TIMED: tl.constexpr):
    z = tl.zeros([32], dtype=tl.int32)
    sm = tl.max(smid(z), axis=0)
    if sm == target_sm:
        won = tl.atomic_cas(flag_ptr, 0, 1)
        if won == 0:
            start = tl.load(start_ptr + z)
            hops = z + n_hops
            hop_address = tl.zeros([32], dtype=tl.int64) + hop_ptr.to(tl.int64, bitcast=True)
            if TIMED:
                cycles, last = tl.inline_asm_elementwise(
                    _TIMED,
                    "=l,=l,l,r,l",
                    [start, hops, hop_address],
                    dtype=(tl.int64, tl.int64),
                    is_pure=False,
                    pack=1,
                )
            else:
                cycles, last = tl.inline_asm_elementwise(
                    _UNTIMED, "=l,=l,l,r", [start, hops], dtype=(tl.int64, tl.int64), is_pure=False, pack=1
                )
            tl.store(out_ptr + tl.arange(0, 32), cycles)
            tl.store(out_ptr + 32 + tl.arange(0, 32), last)
            tl.store(out_ptr + 64 + tl.arange(0, 32), sm + z.to(tl.int64))


class Ring:
    """A random ring of pointers over ``nbytes`` of device memory, one pointer per line."""

    def __init__(self, nbytes: int, device: str, seed: int = 0):
        import torch

        self.lines = max(4, nbytes // LINE)
        self.buffer = torch.zeros(self.lines * LINE // 8, dtype=torch.int64, device=device)
        generator = torch.Generator(device=device)
        generator.manual_seed(seed)
        order = torch.randperm(self.lines, device=device, generator=generator)
        following = torch.roll(order, -1)
        base = self.buffer.data_ptr()
        self.buffer[order * (LINE // 8)] = base + following * LINE
        self.start = torch.tensor([base + int(order[0].item()) * LINE], dtype=torch.int64, device=device)
        self.device = device


def flush_l2(l2_bytes: int, device: str) -> None:
    """Evict L2 (and write back partial lines) by reading a buffer four times its size."""
    import torch

    scratch = torch.ones(max(4 * l2_bytes, 64 << 20) // 4, dtype=torch.float32, device=device)
    scratch.sum()
    torch.cuda.synchronize(device)


def chase(ring: Ring, target_sm: int, hops: int, sm_count: int, *, timed: bool = False):
    """(cycles of the whole chase or None, per-hop cycles or None, SM that ran it)."""
    import torch

    device = ring.device
    out = torch.full((96,), -1, dtype=torch.int64, device=device)
    flag = torch.zeros(1, dtype=torch.int32, device=device)
    hop_buffer = torch.zeros(max(hops, 1), dtype=torch.int32, device=device)
    hops = int(hops) // 4 * 4 if not timed else int(hops)
    chase_kernel[(sm_count * 8,)](ring.start, out, hop_buffer, flag, target_sm, hops, TIMED=timed, num_warps=1)
    torch.cuda.synchronize(device)
    values = out.cpu().numpy()
    if values[64] < 0:
        return None, None, -1
    per_hop = hop_buffer.cpu().numpy().astype(np.float64) if timed else None
    return float(values[0]), per_hop, int(values[64])
