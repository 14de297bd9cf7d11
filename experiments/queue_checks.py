"""Two offline checks of the loaded-latency K-step (``model.core.stage_wait``), on today's model and bundled
profiles.  Run from the repository root (no GPU)::

    python experiments/queue_checks.py more-sms [COUNT] [SEED]
    python experiments/queue_checks.py fast-misses

``more-sms``: random shapes (log-uniform 1..16384) and 1-64 more SMs on the H100 datasheet profile, the best time over
the configs legal on both (as ``tests/model/test_model_predict.py::test_more_sms_never_slower``), the worst ratios
printed (the wait averaged over the waves: 1.0000 on 120 shapes; an earlier form with the load per wave,
``git show e810e0a:reports/results/experiments/queue-form.patch``, read up to 1.104, 551x12184x1017 with 38 more SMs).
``fast-misses``: the fast path against the exact argmin on the bundled H100 profile, the 1200 problems of
``test_fast_pick_is_the_full_argmin_on_the_measured_profile``, misses and their predicted-time ratios.
"""

from __future__ import annotations

import random
import sys

sys.path[:0] = ["tests/model", "tests"]


def more_sms(count: int, seed: int) -> None:
    from test_model_predict import H100, _with  # type: ignore[import-not-found]

    from theodolite.kernels.config import Problem
    from theodolite.model import rank

    rng = random.Random(seed)
    sms = H100.value("sm_count")
    per_sm = H100.value("mma_throughput_bf16") / sms
    worst = []
    for _ in range(count):
        m, n, k = (int(2 ** rng.uniform(0, 14)) for _ in range(3))
        extra = rng.randint(1, 64)
        bigger = _with(H100, sm_count=sms + extra, mma_throughput_bf16=per_sm * (sms + extra),
                       mma_throughput_fp16=per_sm * (sms + extra))  # fmt: skip
        here = {p.key: p for p in rank(Problem(m, n, k), H100)}
        there = {p.key: p for p in rank(Problem(m, n, k), bigger)}
        both = [key for key in here.keys() & there.keys()
                if here[key].details["tail_split"] == there[key].details["tail_split"]]  # fmt: skip
        ratio = min(there[key].time_s for key in both) / min(here[key].time_s for key in both)
        worst.append((ratio, m, n, k, extra))
    for ratio, m, n, k, extra in sorted(worst, reverse=True)[:6]:
        print(f"{ratio:.4f}  {m}x{n}x{k}  +{extra} SMs")


def fast_misses() -> None:
    from test_model_fast import _bundled_h100, fast_misses as misses_of  # type: ignore[import-not-found]

    from theodolite.model.predict import table_for

    misses = misses_of(table_for(_bundled_h100(), "bf16"))
    print(f"{len(misses)} misses of 1200")
    for row in sorted(misses)[:8]:
        print("%.4f  %dx%dx%d %s  fast %s  exact %s" % row)

if __name__ == "__main__":
    if sys.argv[1:2] == ["more-sms"]:
        more_sms(int(sys.argv[2]) if len(sys.argv) > 2 else 120, int(sys.argv[3]) if len(sys.argv) > 3 else 0)
    elif sys.argv[1:2] == ["fast-misses"]:
        fast_misses()
    else:
        sys.exit(__doc__)
