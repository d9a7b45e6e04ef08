"""The spread-aware speedup decision (tools/perf/speedup.py) on synthetic interleaved rounds."""
from __future__ import annotations

import math
import random

import pytest

from tools.perf.speedup import (METHOD_ONE_ROUND, METHOD_ROUNDS, Decision, SpeedupEstimate, decide,
                                estimate_speedup, faster, t_quantile)


def _rounds(rng: random.Random, *, n_rounds: int, median_ms: float, round_sd: float,
            sample_sd: float = 0.02, samples: int = 20,
            drift: list[float] | None = None) -> list[list[float]]:
    """Lognormal samples: a per-round level (own noise round_sd, times a shared drift
    factor when given) and per-sample noise sample_sd around it."""
    out = []
    for r in range(n_rounds):
        level = median_ms * math.exp(rng.gauss(0, round_sd)) * (drift[r] if drift else 1.0)
        out.append([level * math.exp(rng.gauss(0, sample_sd)) for _ in range(samples)])
    return out


@pytest.mark.parametrize("p, df, table", [(0.95, 1, 6.3138), (0.95, 4, 2.1318),
                                          (0.975, 4, 2.7764), (0.95, 30, 1.6973),
                                          (0.995, 5, 4.0321)])
def test_t_quantile_matches_published_table_values(p, df, table):
    assert t_quantile(p, df) == pytest.approx(table, abs=1e-4)


def test_interval_for_identical_distributions_contains_one_at_its_confidence():
    rng = random.Random(7)
    trials = 400
    hits = 0
    for _ in range(trials):
        cand = _rounds(rng, n_rounds=5, median_ms=0.01, round_sd=0.03)
        base = _rounds(rng, n_rounds=5, median_ms=0.01, round_sd=0.03)
        e = estimate_speedup(cand, base)
        hits += e.low <= 1.0 <= e.high
    # 90% nominal; binomial sd at n = 400 is 1.5%: too narrow or too wide both fail
    assert 0.85 <= hits / trials <= 0.95


def test_ratio_is_baseline_time_over_candidate_time():
    rng = random.Random(1)
    cand = _rounds(rng, n_rounds=5, median_ms=1.0, round_sd=0.001)
    base = _rounds(rng, n_rounds=5, median_ms=2.0, round_sd=0.001)
    assert estimate_speedup(cand, base).ratio == pytest.approx(2.0, rel=0.01)


def test_clear_2x_speedup_is_faster_at_threshold_1_1():
    rng = random.Random(2)
    cand = _rounds(rng, n_rounds=5, median_ms=0.005, round_sd=0.05)
    base = _rounds(rng, n_rounds=5, median_ms=0.010, round_sd=0.05)
    assert decide(estimate_speedup(cand, base), 1.1) is Decision.FASTER


def test_clear_2x_slowdown_is_not_faster_at_threshold_1():
    rng = random.Random(3)
    cand = _rounds(rng, n_rounds=5, median_ms=0.010, round_sd=0.05)
    base = _rounds(rng, n_rounds=5, median_ms=0.005, round_sd=0.05)
    assert decide(estimate_speedup(cand, base), 1.0) is Decision.NOT_FASTER


def test_noisy_rounds_are_undecided_although_the_ratio_clears_the_threshold():
    cand = [[1.0, 1.0, 1.0]] * 5
    base = [[r] * 3 for r in (0.9, 1.45, 1.0, 1.4, 1.05)]   # per-round ratios 0.9 .. 1.45
    e = estimate_speedup(cand, base)
    assert e.ratio > 1.1 and decide(e, 1.1) is Decision.UNDECIDED


def test_drift_shared_by_both_figures_of_a_round_cancels():
    rng = random.Random(4)
    drift = [1.0, 1.6, 0.7, 1.3, 0.8]          # clocks moving between rounds, +-60%
    cand = _rounds(rng, n_rounds=5, median_ms=1.0, round_sd=0.005, drift=drift)
    base = _rounds(rng, n_rounds=5, median_ms=1.2, round_sd=0.005, drift=drift)
    assert decide(estimate_speedup(cand, base), 1.1) is Decision.FASTER


def test_more_rounds_narrow_the_interval():
    rng = random.Random(5)
    def width(n):
        e = estimate_speedup(_rounds(rng, n_rounds=n, median_ms=1.0, round_sd=0.05),
                             _rounds(rng, n_rounds=n, median_ms=1.0, round_sd=0.05))
        return e.high / e.low
    assert width(40) < width(5)


def test_same_samples_give_the_same_estimate():
    rng = random.Random(6)
    cand = _rounds(rng, n_rounds=5, median_ms=0.01, round_sd=0.05)
    base = _rounds(rng, n_rounds=5, median_ms=0.02, round_sd=0.05)
    first = estimate_speedup(cand, base)
    assert estimate_speedup([list(r) for r in cand], [list(r) for r in base]) == first


def test_several_rounds_are_labelled_with_the_rounds_method():
    rng = random.Random(8)
    e = estimate_speedup(_rounds(rng, n_rounds=3, median_ms=1.0, round_sd=0.05),
                         _rounds(rng, n_rounds=3, median_ms=1.0, round_sd=0.05))
    assert (e.method, e.rounds) == (METHOD_ROUNDS, 3)


def test_one_round_is_labelled_and_its_interval_brackets_the_ratio():
    rng = random.Random(9)
    e = estimate_speedup(_rounds(rng, n_rounds=1, median_ms=1.0, round_sd=0.0),
                         _rounds(rng, n_rounds=1, median_ms=1.5, round_sd=0.0))
    assert (e.method, e.rounds) == (METHOD_ONE_ROUND, 1) and e.low < e.ratio < e.high


def test_one_round_of_single_samples_is_never_faster():
    assert decide(estimate_speedup([[1.0]], [[10.0]]), 1.1) is Decision.UNDECIDED


def test_low_end_equal_to_the_threshold_is_not_faster():
    e = SpeedupEstimate(ratio=1.2, low=1.1, high=1.3, rounds=5, method=METHOD_ROUNDS)
    assert not faster(e, 1.1)


def test_unequal_round_counts_are_refused():
    with pytest.raises(ValueError):
        estimate_speedup([[1.0], [1.0]], [[1.0]])


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf])
def test_a_sample_that_is_not_a_positive_finite_time_is_refused(bad):
    with pytest.raises(ValueError):
        estimate_speedup([[1.0, bad], [1.0, 1.0]], [[1.0, 1.0], [1.0, 1.0]])


def test_a_verdict_interval_clears_a_threshold_below_its_low_end():
    from tools.perf.speedup import clears
    iv = estimate_speedup([[1.0, 1.0]] * 5, [[2.0, 2.02]] * 4 + [[2.02, 2.0]]).to_json()
    assert clears(iv, 1.5) and not clears(iv, 2.5)


def test_no_interval_never_clears_a_threshold():
    from tools.perf.speedup import clears
    assert not clears(None, 0.1) and not clears({}, 0.1)
