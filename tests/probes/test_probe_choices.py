"""Pure choices of the probes (no GPU): stream-variant pick, FLOP-per-cycle tile score."""

from __future__ import annotations

import pytest


def test_pick_variant_takes_the_fastest_median_and_skips_failures():
    from theodolite.probes.hbm import pick_variant
    from theodolite.probes.stream import StreamVariant

    slow, fast, broken = StreamVariant(block=1024), StreamVariant(block=4096), StreamVariant(block=8192)
    noisy = {slow.key: iter([0, 10.0, 9.0, 30.0]), fast.key: iter([0, 20.0, 21.0, 19.0])}

    def rate(variant):
        if variant == broken:
            raise RuntimeError("does not compile")
        return next(noisy[variant.key])

    best, rates, failures = pick_variant(rate, [slow, broken, fast])
    assert best == fast  # the slow one's single 30 does not win: medians are compared
    assert rates == {slow.key: 10.0, fast.key: 20.0}
    assert list(failures) == [broken.key] and "does not compile" in failures[broken.key]


def test_pick_variant_falls_back_to_the_first_when_all_fail():
    from theodolite.probes.hbm import pick_variant
    from theodolite.probes.stream import StreamVariant

    first = StreamVariant(flat=False)

    def rate(variant):
        raise RuntimeError("no")

    best, rates, failures = pick_variant(rate, [first, StreamVariant()])
    assert best == first and rates == {} and len(failures) == 2


def test_candidate_keys_are_unique_and_quick_is_a_subset():
    from theodolite.probes.hbm import CANDIDATES, QUICK_CANDIDATES

    for kind, variants in CANDIDATES.items():
        keys = [v.key for v in variants]
        assert len(set(keys)) == len(keys)
        assert set(v.key for v in QUICK_CANDIDATES[kind]) <= set(keys)
        assert any(not v.flat for v in QUICK_CANDIDATES[kind])  # the original method stays in the race
        for v in variants:  # ptxas rejects an eviction policy combined with .cg/.cs
            assert not (v.evict and (v.load_cm or v.store_cm)), v.key


def test_tile_score_is_flop_per_cycle_so_a_clock_dip_does_not_decide():
    from theodolite.probes.matrix import per_cycle

    # tile A ran while the clock was high, tile B while it was low: B does more per cycle
    a = per_cycle([900e12, 890e12], [1.98e9, 1.97e9])
    b = per_cycle([850e12, 845e12], [1.60e9, 1.60e9])
    assert b > a
    assert per_cycle([5.0, 7.0], []) == 7.0
    assert per_cycle([5.0], [0.0]) == 5.0


def test_stream_bytes_counts_whole_persistent_shares():
    from theodolite.probes.stream import StreamVariant, stream_bytes

    v = StreamVariant(flat=False, block=4096, per_sm=8)
    got = stream_bytes(v, 2 << 30, 132)
    assert got <= 2 << 30 and got % (4 * 4096 * 132 * 8) == 0
    assert stream_bytes(StreamVariant(), (2 << 30) + 12, 132) == (2 << 30) + 12
    with pytest.raises(TypeError):
        StreamVariant(nonsense=1)  # type: ignore[call-arg]


def test_throughput_carries_the_clock_it_ran_at():
    from theodolite.probes.analysis import summarize
    from theodolite.probes.matrix import _with_clock

    rate = summarize("mma_throughput_bf16", [800e12, 810e12, 805e12], "FLOP/s", "matrix.onchip_dot", settings={"x": 1})
    assert _with_clock(rate, [], 132) is rate  # no clock read: unchanged
    timed = _with_clock(rate, [1.5e9, 1.7e9, 1.6e9], 132)
    assert timed.value == rate.value and timed.settings["x"] == 1
    assert timed.settings["clock_hz_during"] == pytest.approx(1.6e9)
    assert timed.settings["flop_per_cycle_per_sm"] == pytest.approx(rate.value / 1.6e9 / 132)
