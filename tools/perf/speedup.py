"""Is the candidate faster than a baseline? A spread-aware answer from interleaved rounds.

Covers the speedup estimate (baseline time / candidate time, > 1: the candidate is
faster) with an interval, and the decision against a threshold. Does not cover timing
(tools/perf/timer.py), which measure was used, or the wiring into the verdict
(tools/judge/time_phase.py). Pure Python: no torch.

Input: per-round samples (ms) of candidate and baseline, taken interleaved, so that
what drifts between rounds (clocks, temperature, a neighbour on the machine) moves
both figures of a round alike. The round, not the sample, is the unit of replication:
samples of one round are serially correlated and share the round's state, so treating
them as independent would make the interval far too narrow (Kalibera & Jones,
"Rigorous Benchmarking in Reasonable Time", ISMM 2013: replicate at the highest level
that varies and base the interval on it).

Method, two or more rounds ("rounds_log_t"): per round r, d_r = ln(median(baseline_r)
/ median(candidate_r)). The estimate is exp(mean d), the geometric mean of the
per-round ratios; the interval is exp(mean d -/+ t(1 - a/2, n - 1) * sd(d) / sqrt(n)),
the paired t-interval on the log scale: the standard analysis of a ratio of paired
positive measurements, as in average bioequivalence (the 90% interval of the
geometric-mean ratio; Schuirmann, J. Pharmacokinet. Biopharm. 15:657, 1987; FDA
guidance "Statistical Approaches to Establishing Bioequivalence", 2001). Logs make the
ratio symmetric (2x and 0.5x are equally far from 1) and timing noise is closer to
multiplicative than additive. The default confidence 0.90 two-sided makes the low end
a 95% one-sided lower bound, so FASTER claims "above the threshold" at the 5% level.
With 5 rounds t = 2.132: per-round ratios that differ by ~2% give an interval of
about +-2%; 2 rounds give t = 6.314, a wide interval, which is the honest answer.
Why not the alternatives for 5 rounds: a bootstrap over 5 rounds has 126 distinct
resamples and its percentile interval undercovers at such n (Hesterberg, "What
Teachers Should Know About the Bootstrap", Am. Statistician 69:371, 2015); the
min/max of the per-round ratios has a fixed coverage at each n (94% for the median at
n = 5) but grows, never shrinks, as rounds are added.

One round ("one_round_p20_p80"): no between-round spread exists, so the within-round
spread stands in: low = p20(baseline) / p80(candidate), high = p80(baseline) /
p20(candidate) (Timing's quantiles), around the ratio of medians. With fewer than two
samples on a side nothing about the spread is known and the interval is (0, inf):
never FASTER.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from enum import Enum

from tools.verdict import Timing

CONFIDENCE = 0.90
METHOD_ROUNDS = "rounds_log_t"
METHOD_ONE_ROUND = "one_round_p20_p80"


@dataclass(frozen=True)
class SpeedupEstimate:
    """baseline / candidate time: the estimate and its interval; method says how."""
    ratio: float
    low: float
    high: float
    rounds: int
    method: str

    def to_json(self) -> dict:
        return {"ratio": self.ratio, "low": self.low, "high": self.high,
                "rounds": self.rounds, "method": self.method}

    @classmethod
    def from_json(cls, doc: dict) -> "SpeedupEstimate":
        return cls(ratio=float(doc["ratio"]), low=float(doc["low"]), high=float(doc["high"]),
                   rounds=int(doc["rounds"]), method=str(doc["method"]))


class Decision(str, Enum):
    FASTER = "faster"            # the whole interval lies above the threshold
    NOT_FASTER = "not_faster"    # the whole interval lies at or below it
    UNDECIDED = "undecided"      # the interval straddles it


def estimate_speedup(candidate_rounds: list[list[float]], baseline_rounds: list[list[float]],
                     *, confidence: float = CONFIDENCE) -> SpeedupEstimate:
    """The speedup of the candidate over the baseline from rounds of ms samples, round i
    of one list interleaved with round i of the other. ValueError on unequal round
    counts, an empty round, or a sample that is not a positive finite number (the timer
    never yields one; the caller rejects such a candidate before asking)."""
    if len(candidate_rounds) != len(baseline_rounds):
        raise ValueError(f"{len(candidate_rounds)} candidate rounds but "
                         f"{len(baseline_rounds)} baseline rounds")
    if not candidate_rounds:
        raise ValueError("no rounds")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence {confidence} is not in (0, 1)")
    for r in (*candidate_rounds, *baseline_rounds):
        if not r:
            raise ValueError("a round has no samples")
        if not all(math.isfinite(x) and x > 0 for x in r):
            raise ValueError("a sample is not a positive finite number of ms")
    n = len(candidate_rounds)
    if n == 1:
        return _one_round(candidate_rounds[0], baseline_rounds[0])
    d = [math.log(statistics.median(b) / statistics.median(c))
         for c, b in zip(candidate_rounds, baseline_rounds)]
    mean = statistics.fmean(d)
    half = t_quantile(1 - (1 - confidence) / 2, n - 1) * statistics.stdev(d) / math.sqrt(n)
    return SpeedupEstimate(ratio=math.exp(mean), low=math.exp(mean - half),
                           high=math.exp(mean + half), rounds=n, method=METHOD_ROUNDS)


def _one_round(candidate: list[float], baseline: list[float]) -> SpeedupEstimate:
    ratio = statistics.median(baseline) / statistics.median(candidate)
    if len(candidate) < 2 or len(baseline) < 2:
        low, high = 0.0, math.inf
    else:
        c, b = Timing.from_samples(candidate), Timing.from_samples(baseline)
        low, high = b.p20_ms / c.p80_ms, b.p80_ms / c.p20_ms
    return SpeedupEstimate(ratio=ratio, low=low, high=high, rounds=1, method=METHOD_ONE_ROUND)


def decide(estimate: SpeedupEstimate, threshold: float) -> Decision:
    """FASTER than `threshold` x only when the interval's low end is above it."""
    if estimate.low > threshold:
        return Decision.FASTER
    if estimate.high <= threshold:
        return Decision.NOT_FASTER
    return Decision.UNDECIDED


def faster(estimate: SpeedupEstimate, threshold: float) -> bool:
    return decide(estimate, threshold) is Decision.FASTER


def clears(interval: dict | None, threshold: float) -> bool:
    """Does a verdict's speedup interval (its JSON form, Verdict.speedup_interval[b])
    show the candidate faster than `threshold` x? No interval (untimed, or timing not
    trusted) never does."""
    if not interval:
        return False
    return faster(SpeedupEstimate.from_json(interval), threshold)


def t_quantile(p: float, df: int) -> float:
    """The p-quantile (0.5 <= p < 1) of Student's t with df degrees of freedom, by
    bisection on its exact CDF."""
    if not 0.5 <= p < 1 or df < 1:
        raise ValueError(f"t_quantile({p}, {df})")
    target = 2 * p - 1          # P(|T| <= t)
    lo, hi = 0.0, 1.0
    while _t_within(hi, df) < target:
        lo, hi = hi, 2 * hi
    for _ in range(200):
        mid = (lo + hi) / 2
        if _t_within(mid, df) < target:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * hi:
            break
    return (lo + hi) / 2


def _t_within(t: float, df: int) -> float:
    """P(|T| <= t) for integer df, the finite series of Abramowitz & Stegun 26.7.3-4
    with theta = atan(t / sqrt(df))."""
    theta = math.atan(t / math.sqrt(df))
    c2 = math.cos(theta) ** 2
    term = total = 1.0
    if df % 2 == 0:
        for k in range(1, df // 2):                 # up to cos^(df-2)
            term *= c2 * (2 * k - 1) / (2 * k)
            total += term
        return math.sin(theta) * total
    if df == 1:
        return 2 * theta / math.pi
    for k in range(1, (df - 1) // 2):               # up to cos^(df-3)
        term *= c2 * (2 * k) / (2 * k + 1)
        total += term
    return 2 / math.pi * (theta + math.sin(theta) * math.cos(theta) * total)
