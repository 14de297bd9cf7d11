"""Memory traffic of the tiles running at once: L2 requests, HBM misses, bandwidths.

The programs running at once work on consecutive tile ids in the kernels' grouped order
(``GROUP_M`` tile rows, walked column by column).  They request every A and B tile, but HBM
only supplies the distinct A rows and B columns they touch; the rest hits in L2 while the
window's K-panels fit the L2's effective capacity.
"""

from __future__ import annotations

import numpy as np
from theodolite.model.hardware import Hardware


def window_footprint(
    window: np.ndarray, tiles_m: np.ndarray, tiles_n: np.ndarray, group_m: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Distinct tile rows and tile columns that ``window`` consecutive tiles of the grouped order touch."""
    gm = np.minimum(group_m, tiles_m)
    per_group = gm * tiles_n
    within = window <= per_group
    groups = -(-window // per_group)
    rows = np.where(within, np.minimum(gm, window), np.minimum(tiles_m, gm * groups))
    cols = np.where(within, -(-window // gm), tiles_n)
    return rows, cols


def hbm_bandwidth(active_sms: np.ndarray, hw: Hardware) -> np.ndarray:
    """Read bandwidth reachable from ``active_sms`` SMs (whole counts): the profile's curve (core.read_share)."""
    from theodolite.model.core import read_share

    return hw.hbm_read_bandwidth * np.broadcast_to(read_share(active_sms, hw), np.shape(active_sms))


def aligned_copy_time(problem_bytes: tuple[float, float], copies: tuple[bool, bool], hw: Hardware) -> float:
    """Seconds gemm() spends copying misaligned operands to padded buffers (read + write, one launch each)."""
    total = 0.0
    for nbytes, copied in zip(problem_bytes, copies, strict=False):
        if copied:
            total += hw.launch_s + 2.0 * nbytes / hw.hbm_copy_bandwidth
    return total
