"""Does copying an aligned operand whose row pitch is 16 or 32 bytes off a 64-byte boundary pay, and from what size?
(the rule ``kernels.config.needs_aligned_copy`` keeps: PITCH_COPY_BYTES, PITCH_COPY_MIN_REUSE, PITCH_COPY_MIN_FLOPS).

The random-dev shapes with such an operand (no other copy rule touching it) and synthetic ones that vary the reuse
(the other dimension) at a fixed pitch; per shape the configs that were fastest in the committed sweeps plus the
large-tile ones, each timed uncopied (the rule off) and copied (its copy launch included), side by side with
torch.matmul (rotated copies in CUDA graphs, ``Timer.interleaved``).  Run on a GPU from the repository root (writes
``$OUT/pitch-copy-<gpu>.json``):

    PYTHONPATH=$PWD OUT=$OUT python3 experiments/pitch_copy.py

It needs the rule as it was at commit 4d33ac8: copying did not pay (experiments README, "Pitch copies"), so the
rule was taken out again.  To rerun, put it back for the run (``git checkout 4d33ac8 -- kernels/config.py
kernels/launch.py model/fast.py``, then ``git checkout HEAD -- kernels model``).
"""

import math

import torch
from harness import checked_runs, rotated_inputs, rule, write_rows
from theodolite.kernels.benchmark import Timer
from theodolite.kernels.config import needs_aligned_copy
from theodolite.kernels.launch import problem_of

SHAPES = [
    ("dev049", 5013, 12503, 10776), ("dev162", 3669, 3321, 1768), ("dev174", 3470, 9617, 656),
    ("dev197", 4719, 4024, 13900), ("dev121", 613, 944, 7407), ("dev090", 2064, 40, 10217),
    ("b16-m4096-k4096", 4096, 12296, 4096),
    ("b16-m5120", 5120, 12296, 10752), ("b32-m5120", 5120, 12304, 10752), ("b16-m2048", 2048, 12296, 4096),
    ("b16-m1024", 1024, 12296, 4096), ("b16-m512", 512, 12296, 4096), ("a16-n2048", 4096, 2048, 4104),
    ("a16-n1024", 4096, 1024, 4104),
]  # fmt: skip
CONFIGS = [
    "persistent/128x256x64/g8/w8/s3/k1/f", "persistent/128x256x64/g8/w8/s4/k1/f", "tma/128x256x64/g8/w8/s3/k1/f",
    "tma/128x256x64/g8/w8/s4/k1/f", "persistent/128x128x64/g8/w8/s4/k1/f", "streamk/128x256x64/g8/w8/s3/k1",
    "persistent/128x64x64/g8/w4/s4/k1/f", "streamk/128x128x64/g8/w4/s4/k1", "persistent/64x128x64/g8/w4/s4/k1",
]  # fmt: skip
OFF = {"PITCH_COPY_MIN_FLOPS": math.inf}
ON = {"PITCH_COPY_MIN_FLOPS": 0.0, "PITCH_COPY_MIN_REUSE": 1}


device = torch.device("cuda")
gpu = "h200" if "H200" in torch.cuda.get_device_name() else "h100"
timer = Timer()
rows = []
for name, m, n, k in SHAPES:
    sets, calls, ref = rotated_inputs(m, n, k, timer, device)
    a, b, _ = sets[0]
    with rule(OFF):
        off_copies = needs_aligned_copy(problem_of(a, b))
    with rule(ON):
        on_copies = needs_aligned_copy(problem_of(a, b))
    for key in CONFIGS:
        for label, settings in (("off", OFF), ("on", ON)):
            runs = checked_runs(sets, key, ref, settings)
            if runs is not None:
                calls[f"{label} {key}"] = runs
    keys = list(calls)
    times = timer.interleaved([calls[c] for c in keys], keep=range(len(keys)))
    timed = dict(zip(keys, times, strict=True))
    for c, t in timed.items():
        rows.append({"shape": name, "M": m, "N": n, "K": k, "config": c, "us": t * 1e3,
                     "copies_off": off_copies, "copies_on": on_copies})  # fmt: skip
    best_off = min(t for c, t in timed.items() if c.startswith("off "))
    best_on = min(t for c, t in timed.items() if c.startswith("on "))
    print(f"{name} {m}x{n}x{k} copies off {off_copies} on {on_copies}: torch {timed['torch'] * 1e3:.1f} us, "
          f"best uncopied {best_off * 1e3:.1f}, best copied {best_on * 1e3:.1f} (x{best_off / best_on:.3f})",
          flush=True)  # fmt: skip
    del sets, calls, a, b, ref
    torch.cuda.empty_cache()
COMMAND = "PYTHONPATH=$PWD OUT=$OUT python3 experiments/pitch_copy.py"
print("wrote", write_rows(f"pitch-copy-{gpu}", COMMAND, rows))
