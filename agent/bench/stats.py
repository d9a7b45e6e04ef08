"""A run as one problem of krefine bench, and the suite figures drawn from those rows.

`problem_result` turns a loaded run (agent/loop/runstats.py) into one row of the bench
results table (`ProblemResult`): the seed's and the best's verdicts side by side, and
`why_not`: why a problem is not correct and faster. Then the suite figures over the
rows: fast_p, pass@k, the budget curve and `suite_figures` (correct %, fast_1/fast_1.5
of the seed and of the best, geometric means, judge wall and GPU time, seed coverage).
pass@k counts "model" candidates only: the others are not samples of the model.

Apart from agent/loop/runstats.py, which reads one run for inspect and report too: this is
bench's scoring only. It only computes: agent/bench/results.py renders the tables.
"""
from __future__ import annotations

import math
import statistics
from collections import Counter
from dataclasses import dataclass

from agent.loop.runstats import BASELINES, EVAL_NODES, Candidate, RunSnapshot
from agent.loop.state import ORIGIN_SWEEP

FAST_P_THRESHOLDS = (0.0, 1.0, 1.5, 2.0)
PASS_K = (1, 5, 10)
NO_SEED = "no seed"             # ProblemResult.seed when the run has no judged-or-pending seed
NOT_RUN = "—"                   # ... when the problem could not run (or has not yet): nothing known of it


@dataclass(frozen=True)
class ProblemResult:
    """One row of the bench results table. "seed" is round 0's torch.compile seed alone
    (no model, no sweep); "best" is the run's best: the best correct candidate that is
    not the seed (a model candidate or a sweep variant, which may descend from the seed)."""
    problem: str
    run_dir: str
    finished: bool                  # summary.json present
    solved: bool
    stop_reason: str | None
    best: str | None
    correct: bool                   # the delivered (best) candidate is correct
    speedup_eager: float | None
    speedup_compile: float | None
    candidates: int                 # candidates evaluated
    rounds: int
    solved_at: int | None           # model candidates spent through the round that solved it
    n_round1: int                   # round-1 samples judged ... (pass@k, i.i.d. samples)
    c_round1: int                   # ... and how many were correct
    n_all: int                      # all model candidates judged ... (pass@k over the whole run)
    c_all: int                      # (an Inductor seed is neither: it is not a sample of the model)
    tokens: int
    wall_s: float | None
    error: str | None = None        # set when the loop could not run the problem
    # the seed: a verdict status, "pending" (not judged yet), NO_SEED, or NOT_RUN
    seed: str = NO_SEED
    seed_speedup_eager: float | None = None
    seed_speedup_compile: float | None = None
    # the best: "correct", else the furthest status any non-seed candidate reached ("—": none judged)
    best_verdict: str = "—"
    eager_low: float | None = None  # the best's speedup intervals (tools/perf/speedup.py)
    eager_high: float | None = None
    compile_low: float | None = None
    compile_high: float | None = None
    measure: str | None = None      # how the best was timed: per_call, cuda_graph, batched
    device: str | None = None       # run.json's: cuda or cpu
    judge_s: tuple[float, ...] = () # the judge's wall per judged candidate, every origin
    why: str = ""                   # why_not(): "" when correct and faster than eager
    sweep: int = 0                  # sweep variants judged (not in `candidates`: those are the model's)
    seed_s: float | None = None     # what the seed cost: its portfolio's compile, or the run's wait (summary.json)

    @classmethod
    def failed(cls, problem: str, run_dir: str, error: str) -> "ProblemResult":
        return cls(problem=problem, run_dir=run_dir, finished=False, solved=False, stop_reason="error",
                   best=None, correct=False, speedup_eager=None, speedup_compile=None, candidates=0,
                   rounds=0, solved_at=None, n_round1=0, c_round1=0, n_all=0, c_all=0, tokens=0,
                   wall_s=None, error=error, why=error, seed=NOT_RUN)

    @property
    def seed_correct(self) -> bool:
        return self.seed == "correct"


def problem_result(run: RunSnapshot, problem: str | None = None) -> ProblemResult:
    s = run.summary or {}
    best_id = run.best_id
    best = run.candidates.get(best_id) if best_id else None
    if best is not None and best.is_seed:   # the loop never names the seed best; a figure must not either
        best_id, best, s = None, None, {k: v for k, v in s.items() if k not in ("best", "solved")}
    speedup = (s.get("best") or {}).get("speedup") or (best.speedup if best else {})
    judged = [c for c in run.candidates.values() if c.verdict is not None and c.by_model]
    first = [c for c in judged if c.round == 1]
    solved_at = None
    if s.get("solved") and best is not None:
        # the loop stops after the round that solved it: that round's candidates are spent too
        solved_at = sum(1 for c in judged if c.round <= best.round)
    spent = s.get("budget_spent") or {}
    seed = seed_candidate(run)
    seed_speedup = ((s.get("seed") or {}).get("speedup") or (seed.speedup if seed else {}))
    interval = best.interval if best else {}
    return ProblemResult(
        problem=problem or run.name, run_dir=str(run.dir.root), finished=run.summary is not None,
        solved=bool(s.get("solved")), stop_reason=s.get("stop_reason"), best=best_id,
        correct=best_id is not None,  # summary.best only ever names a correct candidate
        speedup_eager=speedup.get("eager"), speedup_compile=speedup.get("compile"),
        candidates=int(s.get("candidates_evaluated", len(judged))),
        rounds=int(s.get("rounds", max((c.round for c in judged), default=0))),
        solved_at=solved_at, n_round1=len(first), c_round1=sum(c.correct for c in first),
        n_all=len(judged), c_all=sum(c.correct for c in judged),
        tokens=int(spent.get("tokens") or sum(c.prompt_tokens + c.completion_tokens for c in run.candidates.values())),
        wall_s=spent.get("wall_s"),
        seed=seed.status if seed else NO_SEED,
        seed_speedup_eager=seed_speedup.get("eager"), seed_speedup_compile=seed_speedup.get("compile"),
        best_verdict="correct" if best_id else _furthest(c.status for c in run.candidates.values()
                                                         if not c.is_seed and c.verdict is not None),
        eager_low=(interval.get("eager") or {}).get("low"), eager_high=(interval.get("eager") or {}).get("high"),
        compile_low=(interval.get("compile") or {}).get("low"),
        compile_high=(interval.get("compile") or {}).get("high"),
        measure=best.measure if best else None, device=run.meta.get("device"),
        judge_s=tuple(judge_walls(run).values()), why=why_not(run),
        sweep=sum(1 for c in run.candidates.values() if c.origin == ORIGIN_SWEEP and c.verdict is not None),
        seed_s=(s.get("seed") or {}).get("seconds"))


def seed_candidate(run: RunSnapshot) -> Candidate | None:
    """Round 0's torch.compile seed, if one was made (judged or still pending)."""
    return next((c for c in run.candidates.values() if c.is_seed), None)


def seed_failure(run: RunSnapshot) -> str | None:
    """Why no seed was made, as the loop traced it (its seed event's error), or None
    when one was made or none was tried."""
    if run.seed_failure is None:
        return None
    return " ".join(run.seed_failure.split()).removeprefix("no Inductor seed: ")


# how far a verdict got, furthest first: the best verdict of a run with no correct candidate
_FURTHEST = ("correct", "incorrect", "timeout", "runtime_error", "compile_error", "rejected", "pending")


def _furthest(statuses) -> str:
    seen = set(statuses)
    return next((s for s in _FURTHEST if s in seen), sorted(seen)[0] if seen else "—")


def why_not(run: RunSnapshot, baseline: str = "eager") -> str:
    """Why the run did not deliver a correct kernel faster than `baseline`, in one line
    for the results table; "" when it did. The delivered kernel is the run's best (never
    the seed). Not about a problem that could not run at all: bench reports that fault.

    One of: "slower: 0.80x eager", "not timed (cpu)" (correct, but nothing says how
    fast), "correct, not timed" (cuda, timing not trusted), "interrupted" (no summary
    yet), "nothing correct beyond the seed; ..." (with the seed's own speed and its
    portfolio's fastest entry where that is faster), "no seed:
    <the seed step's error>", "guard rejected the seed: <first diagnostic>", "numerics:
    <first diagnostic>" (the seed computed wrong values), "compile_error: ...",
    "runtime_error: ...", "timeout: ...", "seed not judged". After a seed's fault, a
    note of how the other candidates fared when none was correct."""
    best = run.candidates.get(run.best_id) if run.best_id else None
    if best is not None and not best.is_seed:
        return _speed(run, best, baseline)
    if run.summary is None:
        return "interrupted"
    seed = seed_candidate(run)
    if seed is None:
        return f"no seed: {seed_failure(run) or 'none was made (seeding off)'}" + _others(run)
    if seed.correct:
        return "nothing correct beyond the seed" + _others(run) + f"; the seed: {_speed(run, seed, baseline) or 'faster'}" \
            + _fastest_entry(run, seed, baseline)
    if seed.status == "pending":
        return "seed not judged" + _others(run)
    label = {"rejected": "guard rejected the seed", "incorrect": "numerics"}.get(seed.status, seed.status)
    return f"{label}: {seed.reason or 'no diagnostic'}" + _others(run)


def _speed(run: RunSnapshot, c: Candidate, baseline: str) -> str:
    """"" when correct `c` is faster than `baseline`, else what is known of its speed."""
    speedup = c.speedup.get(baseline)
    if speedup is None:
        return "not timed (cpu)" if run.meta.get("device") != "cuda" else "correct, not timed"
    return "" if speedup > 1.0 else f"slower: {speedup:.2f}x {baseline}"


def _fastest_entry(run: RunSnapshot, seed: Candidate, baseline: str) -> str:
    """"; its fastest portfolio entry r00-c02: 1.10x eager" when another entry of the seed
    portfolio is correct and faster than the seed (no run names it best: it is what
    agent/bench/kb_harness.py evaluates and the level tables report), else ""."""
    timed = [c for c in run.candidates.values() if c.is_seed and c.correct and c.speedup.get(baseline)]
    fastest = max(timed, key=lambda c: c.speedup[baseline], default=None)
    if fastest is None or fastest.id == seed.id or fastest.speedup[baseline] <= (seed.speedup.get(baseline) or 0.0):
        return ""
    return f"; its fastest portfolio entry {fastest.id}: {fastest.speedup[baseline]:.2f}x {baseline}"


def _others(run: RunSnapshot) -> str:
    """"; N other candidates, none correct (commonest: incorrect)" when any was judged."""
    others = [c for c in run.candidates.values() if not c.is_seed and c.verdict is not None]
    if not others or any(c.correct for c in others):
        return ""
    commonest = Counter(c.status for c in others).most_common(1)[0][0]
    return f"; {len(others)} other candidate{'s' if len(others) != 1 else ''}, none correct (commonest: {commonest})"


def judge_walls(run: RunSnapshot) -> dict[str, float]:
    """candidate -> the judge's wall seconds for it: the verdict's own duration_s, else the
    sum of its compile / test / profile events. Candidates never judged are left out."""
    phases: dict[str, float] = {}
    for e in run.events:
        cid = e.get("candidate")
        if cid and e.get("node") in EVAL_NODES and isinstance(e.get("duration_s"), (int, float)):
            phases[cid] = phases.get(cid, 0.0) + float(e["duration_s"])
    out = {}
    for cid, c in run.candidates.items():
        if c.verdict is None:
            continue
        own = c.verdict.get("duration_s")
        wall = own if isinstance(own, (int, float)) and own > 0 else phases.get(cid)
        if wall is not None:
            out[cid] = wall
    return out


# ---------------------------------------------------------------- suite figures

def fast_p(results: list[ProblemResult], p: float, baseline: str = "eager", of: str = "best") -> float | None:
    """KernelBench's fast_p: share of problems whose kernel is correct and speedup > p;
    `of` = "best" (the run's best) or "seed" (the seed alone).

    A correct kernel with no timing (a cpu run) counts for p = 0 only: any measured
    speedup is above 0, but nothing says it is above 1. None (shown "—") for p > 0 when
    nothing was timed at all: 0.00 would claim every kernel was measured and slow.
    """
    if not results:
        return 0.0
    if p > 0 and all(_side(r, of, baseline)[1] is None for r in results):
        return None
    def fast(r: ProblemResult) -> bool:
        ok, s = _side(r, of, baseline)
        return ok and (s > p if s is not None else p == 0)
    return sum(fast(r) for r in results) / len(results)


def _side(r: ProblemResult, of: str, baseline: str) -> tuple[bool, float | None]:
    """(correct, speedup vs baseline) of the run's best or of its seed."""
    if of == "seed":
        return r.seed_correct, r.seed_speedup_eager if baseline == "eager" else r.seed_speedup_compile
    return r.correct, r.speedup_eager if baseline == "eager" else r.speedup_compile


def pass_at_k(n: int, c: int, k: int) -> float | None:
    """Unbiased pass@k (Chen et al. 2021): 1 - C(n-c, k) / C(n, k); None when n < k."""
    if n < k:
        return None
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def mean_pass_at_k(pairs: list[tuple[int, int]], k: int) -> tuple[float | None, int]:
    """Mean pass@k over problems with at least k samples, and how many problems that was."""
    values = [v for v in (pass_at_k(n, c, k) for n, c in pairs) if v is not None]
    return (sum(values) / len(values) if values else None), len(values)


def budget_curve(results: list[ProblemResult]) -> list[tuple[int, float]]:
    """(candidates spent, share of all problems solved within that many), from 1 up to
    the largest number any problem spent."""
    if not results:
        return []
    spent = [r.solved_at for r in results if r.solved_at is not None]
    top = max([r.candidates for r in results] + spent + [1])
    return [(b, sum(1 for s in spent if s <= b) / len(results)) for b in range(1, top + 1)]


SUITE_FAST = (1.0, 1.5)   # suite_figures' fast_p thresholds


def suite_figures(results: list[ProblemResult]) -> dict:
    """The suite's figures for BENCHMARKS.md, for the seed alone and for the run's best:
    correct (count and share of all problems), fast_1 and fast_1.5 against eager and
    torch.compile, and the geometric-mean speedup over the correct timed problems ("over"
    says how many). Then the best's gain over the seed (geometric mean of best / seed over
    problems where both are correct and timed), the judge's wall per judged candidate
    (every origin), GPU time (the judge walls of cuda runs), the runs' total wall,
    seed coverage (correct seeds / all problems: a correct seed passed the guards, so it
    is pure Triton), and what the seeds cost to make (seconds per problem, summary.json's
    seed.seconds)."""
    n = len(results)
    def side(of: str) -> dict:
        correct = sum(_side(r, of, "eager")[0] for r in results)
        return {"correct": correct, "correct_share": correct / n if n else 0.0,
                "fast": {b: {f"{p:g}": fast_p(results, p, b, of) for p in SUITE_FAST} for b in BASELINES},
                "geomean": {b: _geomean([s for ok, s in (_side(r, of, b) for r in results) if ok and s])
                            for b in BASELINES}}
    walls = [w for r in results for w in r.judge_s]
    gain = {b: _geomean([bs / ss for (bok, bs), (sok, ss) in
                         ((_side(r, "best", b), _side(r, "seed", b)) for r in results)
                         if bok and sok and bs and ss]) for b in BASELINES}
    return {
        "problems": n, "seed": side("seed"), "best": side("best"), "gain_over_seed": gain,
        "judge_s": {"candidates": len(walls), "mean": sum(walls) / len(walls) if walls else None,
                    "median": statistics.median(walls) if walls else None},
        "gpu_s": sum(w for r in results if r.device == "cuda" for w in r.judge_s),
        "wall_s": sum(r.wall_s or 0.0 for r in results),
        "seed_coverage": {"correct": sum(r.seed_correct for r in results), "problems": n},
        "seed_s": _seed_times([r.seed_s for r in results if r.seed_s is not None]),
    }


def _seed_times(times: list[float]) -> dict:
    """The seeds' cost over the problems that recorded one: how many, total, median, most."""
    return {"problems": len(times), "total": sum(times), "median": statistics.median(times) if times else None,
            "max": max(times, default=None)}


def _geomean(values: list[float]) -> dict:
    """{"value": geometric mean or None, "over": how many values}."""
    values = [v for v in values if v > 0]
    return {"value": math.exp(sum(map(math.log, values)) / len(values)) if values else None, "over": len(values)}
