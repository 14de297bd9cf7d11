"""Does a K-step cost the same over one wave as over many, for the composite tile as for the plain ones?

Over the H100's llm sweeps the composite `tma/128x256+64x64` s3 steps 0.90 us a K-step over one wave (priced 0.92, its
shared-memory term with the TMA copies' writes) and 0.96-1.13 over many, where flattened 128x256x64 steps 0.68 and
0.71-0.74 and 128x128x64 s4 0.44 and 0.46-0.50 (priced 0.65-0.71 and 0.40-0.47): the composite slows most past one
wave. Leaving the TMA writes out of that term (``tma_smem_writes.py``; docs/model.md, known defects: TMA copies and
shared memory) fits the few-program probes and prices the composite 0.83, so it is picked where it runs 1.2-1.35x
slower. This times the composite, flattened and plain 128x256x64 (the plain one off the space: is it the flattened
loop?), 128x128x64 at 4 and 6 stages and the pointer-based flattened 128x256x64 on outputs of about one, four and
sixteen waves of 128x256 tiles at K 2048 and 4096, layout nt, bf16; the summary differences the two K to cancel the
fixed costs and divides by the config's waves.

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/wave_steps.py          # GPU: $OUT/wave-steps.json (~2 min)
    PYTHONPATH=$PWD python3 experiments/wave_steps.py --summary F.json PROFILE   # no GPU: ns a K-step, measured / model

H200, 2026-11-29 (``experiments/wave-steps-h200.json``): no K-step slows past one wave.  ns a step over about 1 / 4 /
16 waves: the composite 858 / 821 / 857 (priced 926 with the TMA copies' writes in the shared-memory term, 871
without), flattened TMA 128x256x64 685 / 632 / 659 and the plain loop 692 / 632 / 651 (both 659), 128x128x64 s4 357 /
371 / 360 and s6 362 / 328 / 345 (403 with the writes, 365 and 362 without), the pointer-based flattened 128x256x64
720 / 648 / 671 (704).  Without the writes every TMA step here is priced within 6%; the H100's composite slowing over
many waves is not the H200's (no H100 lent to time it).  The flattened and plain loops of one tile step alike.
"""

from __future__ import annotations

KS = (2048, 4096)
# (name, M, N): 132, 528 and 2112 tiles of 128x256 (one, four and sixteen waves on 132 SMs)
GRIDS = (("w1", 1536, 2816), ("w4", 6144, 2816), ("w16", 6144, 11264))
CONFIGS = (
    "tma/128x256+64x64/g8/w8/s3/k1", "tma/128x256x64/g8/w8/s3/k1/f", "tma/128x256x64/g8/w8/s3/k1",
    "tma/128x128x64/g8/w8/s4/k1", "tma/128x128x64/g8/w8/s6/k1", "persistent/128x256x64/g8/w8/s3/k1/f",
)  # fmt: skip



if __name__ == "__main__":
    from harness import k_steps_main

    k_steps_main("wave-steps.json", GRIDS, KS, CONFIGS, "bf16", "nt")
