"""What does a lone program's K-step cost when its tile's rows or columns lie past the problem's edge, and through TMA?

Out of sample (``wide:300:988520``, H200) the small one-tile problems are the largest class of the tail: 3x18x320,
5x50x448 and 113x24x576 nt pick the pointer-based 16x64x128 s4 (priced 3.2-3.8 us) where the flattened TMA 64x64x128
runs 0.80-0.83 of its time (priced 0.6 us slower).  On the committed sweeps' one-tile shapes of long K (M, N <= 64,
nt) 16x64x128's lone K-step runs 0.39-0.43 us where N < 64 (its columns masked, ``config.edge_mask``) and 0.31-0.33
where N = 64 (priced 0.31-0.32 either way), and TMA 64x64x128's 0.29-0.31 (priced 0.34).  This times one tile (or
four of 16 rows) at K 1024 and 4096, layout nt, bf16: full (16x64 and 64x64 outputs), rows short (M 5 and 40), columns
short (N 50), both short, through 16x64x128 s4, 16x64x32 s2, 64x32x128 s4, 64x64x64 s4 and TMA 64x64x128 flattened;
the summary differences the two K (the launch and a work item's fixed costs cancel).

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/one_tile_steps.py       # GPU: $OUT/one-tile-steps.json (~1 min)
    PYTHONPATH=$PWD python3 experiments/one_tile_steps.py --summary F.json PROFILE  # ns a K-step: measured / model

H200 (``one-tile-steps-h200.json``; ns a lone program's K-step, measured / priced): the flattened TMA 64x64x128 195-264
(334), pointer 64x64x64 s4 222-234 (289), 16x64x128 s4 254-296 with its columns inside the problem (281-311) and
396-423 with them masked (N 50: +140 ns a step, unpriced), 64x32x128 s4 260-322 (301-327); 16x64x32 s2 274-583
(374-496), two to four programs apart.  Whole times at K 1024 (8 steps of 128): TMA 64x64x128 4.1-4.2 us (priced
5.5), 16x64x128 4.2 (4.5-4.8) and 5.5-6.0 with its columns masked.  So a lone K-step is priced 25-40% high for
64x64x64 and TMA 64x64x128 (the stages probes' fits, 8 tiles and more, do not carry to one), and the 16-row tile's
column mask is a cost the model leaves out: both push the small one-tile picks toward 16x64x128.  Dropping the TMA
launch extra (0.37 us) instead moves the seen H200 sweeps 0.9673 / 0.865 -> 0.9652 / 0.858, and +140 ns a masked
K-step of a pointer tile wider than N to 0.9655 / 0.863: neither alone.  No change made.
"""

from __future__ import annotations

KS = (1024, 4096)
# (name, M, N): which edges of a 16x64 and a 64x64 tile fall inside the problem
GRIDS = (("full16", 16, 64), ("full64", 64, 64), ("rows5", 5, 64), ("rows40", 40, 64), ("cols50", 16, 50),
         ("both", 5, 50))  # fmt: skip
CONFIGS = (
    "persistent/16x64x128/g8/w4/s4/k1", "persistent/16x64x32/g8/w4/s2/k1", "persistent/64x32x128/g8/w4/s4/k1",
    "persistent/64x64x64/g8/w4/s4/k1", "tma/64x64x128/g8/w4/s4/k1/f",
)  # fmt: skip



if __name__ == "__main__":
    from harness import k_steps_main

    k_steps_main("one-tile-steps.json", GRIDS, KS, CONFIGS, "bf16", "nt")
