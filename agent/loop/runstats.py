"""Reading finished (or interrupted) run directories, and what is drawn from one run.

One place for what `krefine inspect`, `krefine report`, `krefine export` and `krefine
bench` all need: a run dir as plain values (`load_run` → `RunSnapshot`, read through the
loop's own reader, agent/loop/run.py `Run`: the same candidates, events and verdicts the
loop sees), the candidate lineage, the rounds
table, the node spans of its trace, a candidate's diff against its parent, and the
line a run with no best shows in its place. It only reads: it never writes a run dir
(the loop's Run does) and never renders (inspect/report/bench do). A run
as one row of bench's results, and the suite figures, are agent/bench/stats.py's.

Origins (a candidate's generate/seed/sweep event's metrics["origin"]): "model",
"inductor_seed" (round 0's torch.compile seed) and "sweep" (a seed or candidate
re-launched with other launch constants). Only the seed is kept out of the run's best;
any other origin, unknown ones included, counts as the loop's work.
"""
from __future__ import annotations

import difflib
import json
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from agent.loop.run import Run
from agent.loop.rundir import RunDir
from agent.loop.state import ORIGIN_MODEL, ORIGIN_SEED, ORIGIN_SWEEP
from tools.errors import BadInput, describe_fault
from tools.jsonio import DamagedRecord, read_json

BASELINES = ("eager", "compile")
@dataclass(frozen=True)
class Candidate:
    id: str
    round: int
    index: int
    parent: str | None
    status: str                     # a verdict status, or "pending" when never judged
    speedup: dict[str, float | None]   # eager, compile
    verdict: dict | None            # evals/<id>.json as written (schema 1)
    prompt_tokens: int
    completion_tokens: int
    origin: str                     # "model"; "inductor_seed": round 0's torch.compile seed; "sweep": a re-launch
    change: str | None = None       # a sweep variant's launch constants changed from its parent

    @property
    def correct(self) -> bool:
        return self.status == "correct"

    @property
    def by_model(self) -> bool:
        return self.origin == ORIGIN_MODEL

    @property
    def is_seed(self) -> bool:
        return self.origin == ORIGIN_SEED

    @property
    def interval(self) -> dict[str, dict]:
        """baseline -> {ratio, low, high, ...}: the speedup's interval (tools/perf/speedup.py),
        {} when untimed or its timing was not trusted."""
        return (self.verdict or {}).get("speedup_interval") or {}

    @property
    def measure(self) -> str | None:
        """How its speedup was timed: per_call, cuda_graph or batched (None: untimed)."""
        return ((self.verdict or {}).get("checks") or {}).get("timing_measure")

    @property
    def feedback(self) -> str:
        return (self.verdict or {}).get("feedback", "")

    @property
    def reason(self) -> str:
        """Why it is not correct (or what is flagged when it is): verdict_reason."""
        return verdict_reason(self.verdict) if self.verdict else "not evaluated"

    @property
    def words(self) -> str:
        """Its verdict as `krefine run` said it (verdict_words)."""
        return verdict_words(self.status, self.speedup, self.reason)


def verdict_reason(verdict: dict) -> str:
    """Why a verdict (schema-1 JSON) is not correct, or what is flagged when it is, whole
    (a terminal wraps it): its first diagnostic, a compiler's message by its last line (the
    error itself, after the source it quotes)."""
    if verdict.get("correct") or verdict.get("verdict") == "correct":
        return ", ".join(verdict.get("flags", []))
    for d in verdict.get("diagnostics", []):
        lines = [ln.strip() for ln in str(d.get("message", "")).splitlines() if ln.strip()] or [""]
        where = f" (line {d['line']})" if d.get("line") else ""
        return f"{d.get('kind', '')}: {lines[-1]}{where}"
    return next((ln.strip() for ln in str(verdict.get("feedback", "")).splitlines() if ln.strip()), "")


def verdict_words(status: str, speedup: dict | None, reason: str = "") -> str:
    """One candidate's verdict in words, the same in `krefine run`'s lines and `krefine
    inspect`: "correct  1.20× eager, 0.95× torch.compile  flags" (the profile's bottleneck,
    which may come later, is not the verdict's)."""
    sp = speedup or {}
    timed = any(v is not None for v in sp.values())
    parts = [status,
             f"{fmt_speedup(sp.get('eager'))} eager, {fmt_speedup(sp.get('compile'))} torch.compile" if timed else "",
             reason]
    return "  ".join(p for p in parts if p)


@dataclass(frozen=True)
class RunSnapshot:
    """A run directory as `load_run` read it (a run going on may have written more since)."""
    dir: RunDir
    meta: dict                       # run.json ({} when absent)
    summary: dict | None             # summary.json (None while running / interrupted)
    events: tuple[dict, ...]         # trace.jsonl, in file order
    candidates: dict[str, Candidate] = field(default_factory=dict)  # in id order
    seed_failure: str | None = None  # why round 0 has no seed, as the loop traced it (Run.seed_failure)

    @property
    def problem_path(self) -> str | None:
        return (self.meta.get("problem") or {}).get("path")

    @property
    def problem_source(self) -> str | None:
        return (self.meta.get("problem") or {}).get("source")

    @property
    def name(self) -> str:
        return Path(self.problem_path).stem if self.problem_path else self.dir.run_id

    @property
    def best_id(self) -> str | None:
        best = (self.summary or {}).get("best")
        return best.get("candidate") if best else None

    def parent_of(self, cid: str) -> Candidate | None:
        parent = self.candidates[cid].parent
        return self.candidates.get(parent) if parent else None

    def text(self, path: Path) -> str | None:
        return path.read_text(encoding="utf-8", errors="replace") if path.exists() else None

    def candidate(self, cid: str) -> Candidate:
        if cid not in self.candidates:
            known = ", ".join(self.candidates) or "none"
            raise BadInput(self.dir.root, f"no candidate {cid!r} in this run (known: {known})")
        return self.candidates[cid]

    def round_candidates(self, round_: int) -> list[Candidate]:
        found = [c for c in self.candidates.values() if c.round == round_]
        if not found:
            rounds = sorted({c.round for c in self.candidates.values()})
            raise BadInput(self.dir.root, f"no round {round_} in this run (rounds: {', '.join(map(str, rounds)) or 'none'})")
        return found


def _not_regular(root: Path, depth: int = 2) -> Path | None:
    """The first entry under `root` (to `depth` levels) that is neither a regular file nor a
    folder, following links (a FIFO, a socket, a device, a dangling link or a loop)."""
    try:
        entries = list(os.scandir(root))
    except OSError:
        return None   # unreadable: the readers say so
    for entry in entries:
        if entry.is_dir():
            found = _not_regular(Path(entry.path), depth - 1) if depth > 1 else None
            if found is not None:
                return found
        elif not entry.is_file():
            return Path(entry.path)
    return None


def load_run(path: str | Path) -> RunSnapshot:
    """Read a run directory through the loop's reader; BadInput (one line naming the path)
    when it is missing, not a run directory, or holds a file that is not valid JSON."""
    rd = RunDir(Path(path))
    if not rd.root.exists():
        raise BadInput(rd.root, "no such run directory")
    if not rd.root.is_dir() or not (rd.trace.exists() or rd.summary.exists() or rd.meta.exists()):
        raise BadInput(rd.root, "not a run directory (no trace.jsonl, run.json or summary.json)")
    odd = _not_regular(rd.root)
    if odd is not None:   # a FIFO would be read forever, a device without end
        raise BadInput(odd, "not a regular file: a run directory holds files and folders only")
    try:
        return _load(rd)
    except DamagedRecord as e:
        raise BadInput(e.path, f"{f'line {e.line}: ' if e.line else ''}{e.why}") from None
    except (TypeError, AttributeError, KeyError, ValueError, OSError) as e:   # valid JSON of the wrong shape
        raise BadInput(rd.root, f"a file of the run directory is damaged: {describe_fault(e)}") from None


def _load(rd: RunDir) -> RunSnapshot:
    if rd.best.exists() and not rd.best.is_file():
        raise BadInput(rd.best, "not a file")
    run = _json(rd.trace, lambda p: Run(rd))
    candidates = {}
    for cid in run.candidate_ids():
        record = _json(rd.eval(cid), lambda p: run.record(cid))
        verdict = run.verdict(cid)
        candidates[cid] = Candidate(
            id=cid, round=record["round"], index=record["index"], parent=record["parent"], status=record["status"],
            speedup={b: record["speedup"][b] for b in BASELINES}, verdict=verdict.to_json() if verdict else None,
            prompt_tokens=record["tokens"]["prompt"], completion_tokens=record["tokens"]["completion"],
            origin=record["origin"], change=record["change"])
    return RunSnapshot(dir=rd, meta=_json(rd.meta, lambda p: run.meta()),
                       summary=_json(rd.summary, lambda p: run.summary()), events=tuple(run.events()),
                       candidates=candidates, seed_failure=run.seed_failure())


def _json(path: Path, read=read_json):
    try:
        return read(path)
    except json.JSONDecodeError as e:
        raise BadInput(path, f"not valid JSON ({e.msg}, line {e.lineno})") from None
    except UnicodeDecodeError:
        raise BadInput(path, "not UTF-8 text") from None


# ---------------------------------------------------------------- one run

def children(run: RunSnapshot) -> dict[str | None, list[str]]:
    """parent id -> child ids; a candidate whose parent is unknown counts as a root (None)."""
    tree: dict[str | None, list[str]] = {}
    for c in run.candidates.values():
        parent = c.parent if c.parent in run.candidates else None
        tree.setdefault(parent, []).append(c.id)
    return tree


def diff_to_parent(run: RunSnapshot, cid: str) -> str:
    """Unified diff of the candidate's source against its parent's ('' for a root, or
    when no code could be extracted from its completion)."""
    parent = run.parent_of(cid)
    if parent is None or not run.dir.candidate_src(cid).exists():
        return ""
    lines = difflib.unified_diff((run.text(run.dir.candidate_src(parent.id)) or "").splitlines(keepends=True),
                                 (run.text(run.dir.candidate_src(cid)) or "").splitlines(keepends=True),
                                 fromfile=f"{parent.id}.py", tofile=f"{cid}.py")
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


@dataclass(frozen=True)
class RoundRow:
    round: int
    candidates: int
    verdicts: dict[str, int]                 # status -> count, in first-seen order
    best: dict[str, float | None]            # best correct speedup within the round
    best_so_far: dict[str, float | None]     # ... over this and all earlier rounds
    tokens: int                              # prompt + completion
    wall_s: float | None                     # first event start .. last event end


def rounds_table(run: RunSnapshot) -> list[RoundRow]:
    by_round: dict[int, list[Candidate]] = {}
    for c in run.candidates.values():
        by_round.setdefault(c.round, []).append(c)
    spans = node_spans(run)
    rows, so_far = [], {b: None for b in BASELINES}
    for r in sorted(by_round):
        cs = by_round[r]
        best = {b: _max(c.speedup[b] for c in cs if c.correct) for b in BASELINES}
        so_far = {b: _max([so_far[b], best[b]]) for b in BASELINES}
        in_round = [s for s in spans if s.iteration == r]
        rows.append(RoundRow(
            round=r, candidates=len(cs), verdicts=dict(Counter(c.status for c in cs)),
            best=best, best_so_far=dict(so_far),
            tokens=sum(c.prompt_tokens + c.completion_tokens for c in cs),
            wall_s=(max(s.end_s for s in in_round) - min(s.start_s for s in in_round)) if in_round else None))
    return rows


@dataclass(frozen=True)
class Span:
    """One node's time span. Events are appended when a node ends, so ts is its end."""
    node: str
    candidate: str | None
    iteration: int
    status: str
    start_s: float
    end_s: float
    event: dict


EVAL_NODES = ("compile", "test", "profile")


def node_spans(run: RunSnapshot) -> list[Span]:
    """Every trace event as a span, in file order.

    A candidate's compile/test/profile events are laid back to back, the last ending at
    its ts (the judge runs the steps one after another).
    """
    events = [e for e in run.events if "ts" in e and "node" in e]
    ends = [e["ts"] for e in events]
    last_start: dict[str, float] = {}
    for i in reversed(range(len(events))):
        e = events[i]
        cid = e.get("candidate")
        if e["node"] in EVAL_NODES and cid:
            if cid in last_start:
                ends[i] = min(ends[i], last_start[cid])
            last_start[cid] = ends[i] - (e.get("duration_s") or 0.0)
    return [Span(node=e["node"], candidate=e.get("candidate"), iteration=e.get("iteration", 0),
                 status=e.get("status", ""), start_s=end - (e.get("duration_s") or 0.0), end_s=end, event=e)
            for e, end in zip(events, ends)]


# ---------------------------------------------------------------- small helpers

def fmt_speedup(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f}×"


def _max(values) -> float | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def no_best_line(summary: dict) -> str:
    """What a run with no best says in its place (krefine run's last lines, inspect, the
    report): the seed is never the best, so a correct seed is named beside it."""
    seed = summary.get("seed") or {}
    if seed.get("status") == "seed_failed":
        return f"no correct candidate; {seed.get('error') or 'no Inductor seed'}"
    if seed.get("status") != "correct":
        return "no correct candidate"
    sp = seed.get("speedup") or {}
    timed = any(v is not None for v in sp.values())
    figures = (f": {fmt_speedup(sp.get('eager'))} vs eager, {fmt_speedup(sp.get('compile'))} vs torch.compile"
               if timed else " (untimed on cpu)")
    return f"no correct candidate beyond the Inductor seed; the seed {seed.get('candidate')} is correct{figures}"


def solved_text(summary: dict) -> str:
    """'yes', 'no', or on cpu (nothing timed) what a yes means there."""
    if not summary.get("solved"):
        return "no"
    return "yes" if summary.get("timed", True) else "yes (correct; nothing is timed on cpu)"


def judged_counts(pairs) -> dict[str, int]:
    """{"seed": 1, "sweep": 3, "model": 3} from (origin, status) pairs, what was never judged
    left out (the model's candidates alone are the budget's `candidates`)."""
    judged = [origin for origin, status in pairs if status not in (None, "pending")]
    return {"seed": judged.count(ORIGIN_SEED), "sweep": judged.count(ORIGIN_SWEEP),
            "model": sum(o not in (ORIGIN_SEED, ORIGIN_SWEEP) for o in judged)}


def run_judged(run: RunSnapshot) -> dict[str, int]:
    """judged_counts of a run as its directory holds it."""
    return judged_counts((c.origin, c.status) for c in run.candidates.values())


def judged_text(counts: dict[str, int]) -> str:
    """'7 judged: 1 seed, 3 sweep variants, 3 from the model'."""
    names = {"seed": ("seed", "seeds"), "sweep": ("sweep variant", "sweep variants"),
             "model": ("from the model", "from the model")}
    said = [f"{n} {names[k][n != 1]}" for k, n in counts.items() if n]
    return f"{sum(counts.values())} judged" + (f": {', '.join(said)}" if said else "")
