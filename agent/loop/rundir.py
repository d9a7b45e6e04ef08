"""The run directory (docs/DESIGN.md "Run directory"): paths, candidate ids, trace events.

This module is the contract between the loop that writes a run (its one writer is
agent/loop/run.py's Run) and everything that reads one (inspect, report, export, bench).
It holds no loop logic. Layout:

  trace.jsonl           one event per line (TRACE_FIELDS), appended + fsynced; node is one
                        of NODES: the loop's steps ("sweep" with status "prescreen": the
                        sweep's pre-screen of candidate <id>'s variants), and "evaluate"
                        for what befell the evaluator under a candidate (status
                        "judge_died": krefine bench --ray lost the judge actor judging it
                        and handed it to another)
  candidates/<id>.py    every candidate's extracted source
  prompts/<id>.txt      exact prompt text sent for that candidate
  completions/<id>.txt  raw model output for that candidate: the one copy of it. Its
                        generate event carries the rest (parent, tokens, model,
                        finish_reason); `completions()` joins the two, in the order they
                        were made (what `--model replay:RUN_DIR` hands out again)
  evals/<id>.json       the verdict JSON (schema 1)
  best.py               best correct candidate so far
  summary.json          run outcome
  prescreen/<id>.json   what the sweep's pre-screen of candidate <id> found (agent/loop/sweep_plan.py)
  report.html           written by `krefine report`

Candidate ids are `r<round:02d>-c<index:02d>`, rounds counted from 1, so lexical order
is generation order. Round 0 holds `r00-c00`, the Inductor seed ([search] seed_kernel =
"inductor"): its generate event's metrics carry "origin": "inductor_seed". Constant-sweep
variants (agent/search/sweep.py) follow the model's candidates of the round they were made in
(after the seed in round 0); their generate events carry "origin": "sweep", "parent" and
"change" (the launch constants changed); they have no prompt or completion.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from agent.loop.state import ORIGIN_MODEL
from tools.jsonio import read_json_object, read_jsonl, write_text_atomic
from tools.verdict import Verdict

TRACE_SCHEMA = 1
NODES = ("generate", "sweep", "compile", "test", "profile", "decide", "evaluate")
# every trace event carries exactly these keys
TRACE_FIELDS = ("schema", "run_id", "ts", "iteration", "candidate", "node", "status",
                "duration_s", "metrics", "error", "artifacts")


def candidate_id(round_: int, index: int) -> str:
    return f"r{round_:02d}-c{index:02d}"


def parse_candidate_id(cid: str) -> tuple[int, int]:
    r, c = cid.split("-")
    return int(r[1:]), int(c[1:])


@dataclass(frozen=True)
class RunDir:
    """Paths of a run directory and plain reads of its files (inspect, report, export,
    bench). While a loop runs, agent/loop/run.py's Run is their one writer."""
    root: Path

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
    def report(self) -> Path: return self.root / "report.html"
    @property
    def meta(self) -> Path: return self.root / "run.json"  # problem path, config, model, device

    # 2) per-candidate artifacts
    def candidate_src(self, cid: str) -> Path: return self.root / "candidates" / f"{cid}.py"
    def prompt(self, cid: str) -> Path: return self.root / "prompts" / f"{cid}.txt"
    def completion(self, cid: str) -> Path: return self.root / "completions" / f"{cid}.txt"
    def eval(self, cid: str) -> Path: return self.root / "evals" / f"{cid}.json"
    def prescreen(self, parent: str) -> Path: return self.root / "prescreen" / f"{parent}.json"

    def judged(self) -> set[str]:
        """The candidates with a verdict on disk (written whole: tools/jsonio)."""
        return {p.stem for p in (self.root / "evals").glob("*.json")}

    def written(self) -> set[str]:
        """The candidates with a source on disk (the seed, sweep variants, model candidates)."""
        return {p.stem for p in (self.root / "candidates").glob("*.py")}

    def create(self) -> "RunDir":
        """Create the directory; refuse one that exists and is not empty."""
        if self.root.is_dir() and any(self.root.iterdir()):
            from tools.errors import BadInput
            raise BadInput(self.root, "run directory exists and is not empty (use `krefine resume` or another --out)")
        from tools.errors import BadInput, check_writable
        check_writable(self.root, "run directory", directory=True)
        try:
            for sub in ("candidates", "prompts", "completions", "evals"):
                (self.root / sub).mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise BadInput(self.root, f"run directory: cannot create it: {e.strerror or e}") from None
        return self

    # 3) reads
    def events(self) -> Iterator[dict]:
        """Every event so far, in file order."""
        return iter(list(read_jsonl(self.trace)) if self.trace.exists() else [])

    def events_of(self, cid: str | None) -> list[dict]:
        """The events naming candidate `cid` (None: those naming none), in file order."""
        return [e for e in self.events() if e.get("candidate") == cid]

    def source(self, cid: str) -> str | None:
        """candidates/<cid>.py, or None when no code was extracted for it."""
        path = self.candidate_src(cid)
        return path.read_text(encoding="utf-8") if path.exists() else None

    def verdict(self, cid: str) -> Verdict | None:
        """evals/<cid>.json as a Verdict, or None before the candidate is judged."""
        path = self.eval(cid)
        return Verdict.from_json(read_json_object(path)) if path.exists() else None

    # 5) the model's completions: text in completions/, the rest in the generate event
    def completion_ids(self) -> list[str]:
        """The model-written candidates, in the order their completions were recorded."""
        return [e["candidate"] for e in self.events() if e["node"] == "generate" and e["candidate"]
                and (e.get("metrics") or {}).get("origin", ORIGIN_MODEL) == ORIGIN_MODEL]

    def completion_record(self, cid: str, event: dict | None = None) -> dict | None:
        """{"candidate", "parent", "round", "completion", "prompt_tokens", "completion_tokens",
        "model", "finish_reason"} of a model-written candidate; None before its generate
        event (written after its files: a candidate without one was cut off by a kill)."""
        event = event or next((e for e in self.events_of(cid) if e["node"] == "generate"), None)
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
        return read_json_object(self.summary) if self.summary.exists() else None

    def write_text(self, path: Path, text: str) -> None:
        write_text_atomic(path, text)
