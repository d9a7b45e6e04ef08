"""The run directory (docs/DESIGN.md "Run directory"): paths, candidate ids, trace events.

This module is the contract between the loop that writes a run (agent/loop/graph.py) and
everything that reads one (inspect, report, export, bench, resume). It holds no loop
logic. Layout:

  trace.jsonl           one event per line (TRACE_FIELDS), appended + fsynced; node is one
                        of NODES: the loop's steps, and "evaluate" for what befell the
                        evaluator under a candidate (status "judge_died": krefine bench
                        --ray lost the judge actor judging it and handed it to another)
  candidates/<id>.py    every candidate's extracted source
  prompts/<id>.txt      exact prompt text sent for that candidate
  completions/<id>.txt  raw model output for that candidate: the one copy of it. Its
                        generate event carries the rest (parent, tokens, model,
                        finish_reason); `completions()` joins the two, in the order they
                        were made (what `--model replay:RUN_DIR` hands out again)
  evals/<id>.json       the verdict JSON (schema 1)
  best.py               best correct candidate so far
  summary.json          run outcome
  checkpoint.sqlite     langgraph's checkpoints: a cache, never read back (agent/loop/resume.py
                        rebuilds the loop's state from the files above)
  report.html           written by `krefine report`

Candidate ids are `r<round:02d>-c<index:02d>`, rounds counted from 1, so lexical order
is generation order. Round 0 holds `r00-c00`, the Inductor seed ([search] seed_kernel =
"inductor"): its generate event's metrics carry "origin": "inductor_seed". Constant-sweep
variants (agent/loop/sweep.py) follow the model's candidates of the round they were made in
(after the seed in round 0); their generate events carry "origin": "sweep", "parent" and
"change" (the launch constants changed); they have no prompt or completion.
"""
from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from agent.loop.state import ORIGIN_MODEL
from tools.jsonio import append_jsonl, read_json, read_jsonl, write_json, write_text_atomic
from tools.verdict import Verdict

TRACE_SCHEMA = 1
NODES = ("generate", "compile", "test", "profile", "decide", "evaluate")
# every trace event carries exactly these keys
TRACE_FIELDS = ("schema", "run_id", "ts", "iteration", "candidate", "node", "status",
                "duration_s", "metrics", "error", "artifacts")


def candidate_id(round_: int, index: int) -> str:
    return f"r{round_:02d}-c{index:02d}"


def parse_candidate_id(cid: str) -> tuple[int, int]:
    r, c = cid.split("-")
    return int(r[1:]), int(c[1:])


@dataclass
class _Memory:
    """What one RunDir object has read or written, so the loop reads each file at most
    once: the trace (read from the file once, then kept as appended; re-reading made a
    run quadratic), its events by candidate, candidates' sources and their verdicts.
    One process writes a run at a time."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    events: list | None = None
    appending: bool = False                               # trace.jsonl's tail made whole for appends
    by_candidate: dict = field(default_factory=dict)      # candidate id | None -> [event, ...]
    sources: dict = field(default_factory=dict)           # candidate id -> source text
    verdicts: dict = field(default_factory=dict)          # candidate id -> Verdict


@dataclass(frozen=True)
class RunDir:
    root: Path
    _memory: _Memory = field(default_factory=_Memory, init=False, repr=False, compare=False)

    @property
    def run_id(self) -> str:
        return self.root.name

    # 1) fixed files
    @property
    def trace(self) -> Path: return self.root / "trace.jsonl"
    @property
    def summary(self) -> Path: return self.root / "summary.json"
    @property
    def best(self) -> Path: return self.root / "best.py"
    @property
    def checkpoint(self) -> Path: return self.root / "checkpoint.sqlite"
    @property
    def report(self) -> Path: return self.root / "report.html"
    @property
    def meta(self) -> Path: return self.root / "run.json"  # problem path, config, model, device

    # 2) per-candidate artifacts
    def candidate_src(self, cid: str) -> Path: return self.root / "candidates" / f"{cid}.py"
    def prompt(self, cid: str) -> Path: return self.root / "prompts" / f"{cid}.txt"
    def completion(self, cid: str) -> Path: return self.root / "completions" / f"{cid}.txt"
    def eval(self, cid: str) -> Path: return self.root / "evals" / f"{cid}.json"

    def judged(self) -> set[str]:
        """The candidates with a verdict on disk (written whole: tools/jsonio)."""
        return {p.stem for p in (self.root / "evals").glob("*.json")}

    def written(self) -> set[str]:
        """The candidates with a source on disk (the seed, sweep variants, model candidates)."""
        return {p.stem for p in (self.root / "candidates").glob("*.py")}

    def create(self) -> "RunDir":
        """Create the directory; refuse one that exists and is not empty."""
        if self.root.exists() and any(self.root.iterdir()):
            from tools.errors import BadInput
            raise BadInput(self.root, "run directory exists and is not empty (use `krefine resume` or another --out)")
        for sub in ("candidates", "prompts", "completions", "evals"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        return self

    # 3) trace events
    def append_event(self, *, iteration: int, candidate: str | None, node: str, status: str,
                     duration_s: float = 0.0, metrics: dict | None = None,
                     error: str | None = None, artifacts: dict | None = None) -> dict:
        if node not in NODES:
            raise ValueError(f"unknown trace node {node!r}")
        event = {"schema": TRACE_SCHEMA, "run_id": self.run_id, "ts": time.time(),
                 "iteration": iteration, "candidate": candidate, "node": node,
                 "status": status, "duration_s": round(duration_s, 6),
                 "metrics": metrics or {}, "error": error,
                 "artifacts": {k: os.path.relpath(v, self.root) if os.path.isabs(str(v)) else str(v)
                               for k, v in (artifacts or {}).items()}}
        with self._memory.lock:
            self._events()
            if not self._memory.appending:
                _mend_tail(self.trace)
                self._memory.appending = True
            append_jsonl(self.trace, event)
            self._keep(event)
        return event

    def events(self) -> Iterator[dict]:
        """Every event so far, in file order: the file is read once per RunDir object,
        then what this object appends is added."""
        with self._memory.lock:
            return iter(list(self._events()))

    def events_of(self, cid: str | None) -> list[dict]:
        """The events naming candidate `cid` (None: those naming none), in file order."""
        with self._memory.lock:
            self._events()
            return list(self._memory.by_candidate.get(cid, ()))

    def last_event(self) -> dict | None:
        with self._memory.lock:
            events = self._events()
            return events[-1] if events else None

    def _events(self) -> list:
        memory = self._memory
        if memory.events is None:
            memory.events = []
            for event in (read_jsonl(self.trace) if self.trace.exists() else ()):
                self._keep(event)
        return memory.events

    def _keep(self, event: dict) -> None:
        self._memory.events.append(event)
        self._memory.by_candidate.setdefault(event.get("candidate"), []).append(event)

    # 4) a candidate's source and verdict: written once, then read from memory
    def write_source(self, cid: str, source: str) -> None:
        write_text_atomic(self.candidate_src(cid), source)
        self._memory.sources[cid] = source

    def source(self, cid: str) -> str | None:
        """candidates/<cid>.py, or None when no code was extracted for it."""
        return _remembered(self._memory.sources, cid, self.candidate_src(cid),
                           lambda path: path.read_text(encoding="utf-8"))

    def write_verdict(self, cid: str, verdict: Verdict) -> None:
        write_json(self.eval(cid), verdict.to_json())
        self._memory.verdicts[cid] = verdict

    def verdict(self, cid: str) -> Verdict | None:
        """evals/<cid>.json as a Verdict, or None before the candidate is judged."""
        return _remembered(self._memory.verdicts, cid, self.eval(cid),
                           lambda path: Verdict.from_json(read_json(path)))

    # 5) the model's completions: text in completions/, the rest in the generate event
    def completion_ids(self) -> list[str]:
        """The model-written candidates, in the order their completions were recorded."""
        return [e["candidate"] for e in self.events() if e["node"] == "generate" and e["candidate"]
                and (e.get("metrics") or {}).get("origin", ORIGIN_MODEL) == ORIGIN_MODEL]

    def completion_record(self, cid: str) -> dict | None:
        """{"candidate", "parent", "round", "completion", "prompt_tokens", "completion_tokens",
        "model", "finish_reason"} of a model-written candidate; None before its generate
        event (written after its files: a candidate without one was cut off by a kill)."""
        event = next((e for e in self.events_of(cid) if e["node"] == "generate"), None)
        if event is None:
            return None
        m = event.get("metrics") or {}
        return {"candidate": cid, "parent": m.get("parent"), "round": event["iteration"],
                "completion": self.completion(cid).read_text(encoding="utf-8"),
                "prompt_tokens": int(m.get("prompt_tokens") or 0),
                "completion_tokens": int(m.get("completion_tokens") or 0),
                "model": m.get("model"), "finish_reason": m.get("finish_reason")}

    def completions(self) -> list[dict]:
        """Every completion the model gave this run, in order (`completion_record`)."""
        return [self.completion_record(cid) for cid in self.completion_ids()]

    # 6) small helpers so readers never build paths by hand
    def read_summary(self) -> dict | None:
        return read_json(self.summary) if self.summary.exists() else None

    def write_summary(self, summary: dict[str, Any]) -> None:
        write_json(self.summary, {"schema": 1, **summary})

    def write_text(self, path: Path, text: str) -> None:
        write_text_atomic(path, text)


def _mend_tail(path: Path) -> None:
    """Before a session's first append: a last line without its newline (a kill mid-append)
    is cut, as read_jsonl skips it, or ended when it is a whole record, as read_jsonl keeps
    it; appended after as it is, it would be a broken line mid-file that every read fails on.
    One process writes a run at a time, so no other writer is mid-line."""
    try:
        f = open(path, "rb+")
    except FileNotFoundError:
        return
    with f:
        size = f.seek(0, os.SEEK_END)
        if size == 0:
            return
        f.seek(size - 1)
        if f.read(1) == b"\n":
            return
        f.seek(0)
        data = f.read()
        start = data.rfind(b"\n") + 1
        try:
            json.loads(data[start:])
        except ValueError:           # torn (JSONDecodeError, or bytes cut mid-character)
            f.truncate(start)
        else:
            f.seek(size)
            f.write(b"\n")
        f.flush()
        os.fsync(f.fileno())


def _remembered(store: dict, cid: str, path: Path, read: Callable[[Path], Any]) -> Any:
    """store[cid], read from `path` the first time it is asked for; None while no such file."""
    if cid not in store:
        if not path.exists():
            return None
        store[cid] = read(path)
    return store[cid]
