"""Live progress of a run in the terminal, and the final summary.

On a TTY a rich Live table (round / candidate / parent / verdict / speedup /
bottleneck / note) is redrawn as candidates are generated and judged; otherwise one
plain line per event (long ones wrapped, never cut), so logs and CI output stay readable.
The runner calls `started` first (the device, before anything slow) and `finished` with
summary.json's contents; the loop's nodes call `generated`, `judging`, `stepping`,
`evaluated` and `decided` (from evaluation threads too, hence the lock). While a seed is
made or a candidate judged, a heartbeat says what and for how long whenever nothing was
said for `heartbeat_s` (one daemon thread; it prints under the same lock as every event,
so its lines never interleave with theirs).

Does not write anything to the run directory: trace.jsonl is the record, this is
only a view.
"""
from __future__ import annotations

import sys
import textwrap
import threading
import time
from typing import Any, TextIO

from rich.console import Console
from rich.live import Live
from rich.table import Table

from agent.loop.rundir import parse_candidate_id
from agent.loop.runstats import judged_text, no_best_line, solved_text, verdict_reason, verdict_words

_STYLE = {"correct": "green", "incorrect": "yellow", "compile_error": "red", "runtime_error": "red",
          "timeout": "magenta", "rejected": "magenta", "pending": "dim", "judging": "cyan"}
_MAX_ROWS = 30  # the live table shows the newest rows; the trace has them all


def _speedup(speedup: dict | None) -> str:
    if not speedup or all(v is None for v in speedup.values()):
        return "-"
    return " / ".join(f"{v:.2f}x" if v is not None else "-" for v in (speedup.get("eager"), speedup.get("compile")))


def _reason(verdict: Any) -> str:
    """Why it is not correct, or what is flagged: inspect's words (runstats.verdict_reason)."""
    return verdict_reason(verdict.to_json()) if verdict is not None else ""


def _change(record: dict) -> str:
    """A sweep variant's launch constants ("sweep: XBLOCK 1024->2048"), a seed portfolio
    entry's configuration ("Inductor templates+tf32x3"); "" for others."""
    if not record.get("change"):
        return ""
    return record["change"] if record.get("origin") == "inductor_seed" else f"sweep: {record['change']}"


# what a judgement's step does, for the heartbeat
_STEP_WORDS = {"compile": "compile (guards, the reference, the candidate's worker)",
               "test": "test (the trials)", "profile": "profile (timing)"}


def _next_step(state: dict) -> str:
    return f"sweep {state['sweep_next']}" if state.get("sweep_next") else "continue"


class Progress:
    """Shared bookkeeping; subclasses decide how to show it."""

    def __init__(self) -> None:
        self.rows: dict[str, dict] = {}
        self.status_line = ""
        self._lock = threading.Lock()
        self._last_tick = -1e9
        self._busy: dict[str, list] = {}      # candidate -> [what it is doing, since (monotonic s)]
        self._last_said = time.monotonic()    # when a line was last shown
        self._stop = threading.Event()
        self._beater: threading.Thread | None = None

    heartbeat_s = 10.0   # the longest silence while something is being made or judged

    def started(self, problem: str, device: str, run_dir: str) -> None:
        """The run's first line: the problem and the device (before the model loads or the
        judge starts, which take a while); the last names `run_dir`."""
        where = ("cpu (Triton's interpreter): correctness only, nothing timed" if device == "cpu" else
                 "cuda: judged and timed against eager and torch.compile")
        with self._lock:
            self._show_line(f"krefine: {problem} on {where}")

    def stepping(self, cid: str, node: str) -> None:
        """A judgement's step began (compile, test, profile): what the heartbeat names."""
        with self._lock:
            if cid in self._busy:
                self._busy[cid][0] = f"judging: {_STEP_WORDS.get(node, node)}"

    def beat(self) -> None:
        """One heartbeat: a line when something is being made or judged and nothing was
        said for heartbeat_s (the beater thread calls this every second)."""
        with self._lock:
            now = time.monotonic()
            if not self._busy or now - self._last_said < self.heartbeat_s:
                return
            cid, (what, since) = min(self._busy.items(), key=lambda kv: kv[1][1])
            others = len(self._busy) - 1
            self._show_line(f"  … {cid} {what}, {now - since:.0f} s"
                            + (f" ({others} other candidate{'s' * (others != 1)} too)" if others else ""))

    def _working(self, cid: str, what: str) -> None:
        """`cid` is being made or judged (called under the lock); starts the beater once."""
        self._busy[cid] = [what, time.monotonic()]
        if self._beater is None and self.beats:
            self._beater = threading.Thread(target=self._beat_on, name="krefine-heartbeat", daemon=True)
            self._beater.start()

    beats = True   # whether a thread beats (QuietProgress: nobody reads it)

    def _beat_on(self) -> None:
        while not self._stop.wait(1.0):
            self.beat()

    def resumed(self, state: dict, judged: set[str] | None = None, written: set[str] | None = None) -> None:
        """A resumed run: show what earlier sessions already judged. `state`: Run.view of
        the last decide's state; `judged`: the candidates with a verdict in the run
        directory, `written`: those with a source there; together they say which round a
        kill interrupted."""
        judged = set(judged or ()) | {c for c, r in state["candidates"].items() if r["status"] != "pending"}
        rounds = {c: r["round"] for c, r in state["candidates"].items()}
        rounds.update({c: parse_candidate_id(c)[0] for c in written or ()})
        current = max([state["round"], *rounds.values()])
        unjudged = sorted(c for c, n in rounds.items() if n == current and c not in judged)
        with self._lock:
            for record in state["candidates"].values():
                self.rows[record["id"]] = {"round": record["round"], "id": record["id"],
                                           "parent": record["parent"] or "-", "verdict": record["status"],
                                           "speedup": _speedup(record["speedup"]),
                                           "bottleneck": record.get("bottleneck") or "", "note": ""}
            if unjudged:
                self.status_line = (f"resuming round {current}: {len(judged)} candidates already judged, "
                                    f"{len(unjudged)} of round {current} still to judge")
            else:
                self.status_line = f"resuming after round {current}: {len(judged)} candidates already judged"
            self._show_decided()

    def generated(self, record: dict) -> None:
        with self._lock:
            self._busy.pop(record["id"], None)
            self.rows[record["id"]] = {"round": record["round"], "id": record["id"],
                                       "parent": record["parent"] or "-", "verdict": "pending",
                                       "speedup": "-", "bottleneck": "", "note": _change(record)}
            self._show_generated(self.rows[record["id"]])

    def seeding(self, cid: str, timeout_s: float, cached: bool = False) -> None:
        """Round 0's Inductor seed is being made (up to `timeout_s`), or read from the seed
        cache (`cached`)."""
        with self._lock:
            self.rows[cid] = {"round": 0, "id": cid, "parent": "-", "verdict": "seeding", "speedup": "-",
                              "bottleneck": "", "started": f"{'reading' if cached else 'making'} the Inductor seed",
                              "note": "from the seed cache" if cached else
                              f"torch.compile in its own process, at most {timeout_s:.0f} s"}
            self._working(cid, f"{'reading' if cached else 'making'} the Inductor seed")
            self._show_started(self.rows[cid])

    def note(self, text: str) -> None:
        """A step between candidates (the sweep's pre-screen): shown as the status line."""
        with self._lock:
            self.status_line = text
            self._show_decided()

    tick_s = 0.5   # the status line's count is redrawn at most this often

    def generating(self, text: str) -> None:
        """The model is writing (a token count while it runs): the status line."""
        now = time.monotonic()
        if now - self._last_tick >= self.tick_s:
            self._last_tick = now
            self.note(text)

    def token_ticker(self, round_: int, count: int, limit: int, device: str):
        """on_tokens for a backend that counts: 'round 1: writing 4 candidates, 412 of at most
        2048 tokens each, 37 s', with a hint on cpu where a long limit costs minutes."""
        start = time.monotonic()

        def tick(done: int) -> None:
            elapsed = time.monotonic() - start
            hint = (" (on cpu a long completion takes minutes: --set sampling.max_new_tokens=256 cuts it)"
                    if device == "cpu" and limit > 512 and elapsed > 20 else "")
            self.generating(f"round {round_}: writing {count} candidate{'s' * (count != 1)}, "
                            f"{done} of at most {limit} tokens each, {elapsed:.0f} s{hint}")
        return tick

    def judging(self, record: dict) -> None:
        """A candidate went to the judge (its verdict comes with evaluated())."""
        with self._lock:
            row = self.rows.setdefault(record["id"], {"round": record["round"], "id": record["id"],
                                                      "parent": record["parent"] or "-", "speedup": "-",
                                                      "bottleneck": "", "note": _change(record)})
            row["verdict"] = "judging"
            self._working(record["id"], "judging")
            self._show_started(row)

    def evaluated(self, record: dict, verdict: Any) -> None:
        with self._lock:
            self._busy.pop(record["id"], None)
            row = self.rows.setdefault(record["id"], {"round": record["round"], "id": record["id"],
                                                      "parent": record["parent"] or "-"})
            reason = _reason(verdict)
            row.update(verdict=record["status"], speedup=_speedup(record["speedup"]),
                       bottleneck=record.get("bottleneck") or "",
                       note=" · ".join(x for x in (_change(record), reason) if x), change=_change(record),
                       words=verdict_words(record["status"], record["speedup"], reason))
            self._show_evaluated(row)

    def decided(self, state: dict) -> None:
        with self._lock:
            spent = state["spent"]
            best = state["best"]
            speed = _speedup(state["candidates"][best]["speedup"]) if best else "-"
            # every verdict so far (seeds and sweep variants too); the model's count in the budget
            judged = sum(1 for r in state["candidates"].values() if r.get("status", "pending") != "pending")
            seed = state["candidates"].get("r00-c00")
            seeded = f" · seed {seed['status']}" if seed and seed.get("status", "pending") != "pending" else ""
            self.status_line = (f"round {state['round']}: best {best or 'none'} ({speed}){seeded} · "
                                f"{judged} judged ({spent['candidates']} by the model) · {spent['tokens']} tokens · "
                                f"{spent['wall_s']:.0f}s · {state['stop_reason'] or _next_step(state)}")
            self._show_decided()

    def finished(self, summary: dict, run_dir: str) -> None:
        self.close()
        best = summary.get("best")
        judged = judged_text(summary["judged"]) if "judged" in summary else \
            f"{summary['candidates_evaluated']} candidates"       # a run finished before summaries had counts
        solved = solved_text(summary)
        lines = [f"stop reason: {summary['stop_reason']}  solved: {solved}",
                 (f"best: {best['candidate']} speedup {_speedup(best['speedup'])} (eager / compile)"
                  if summary.get("timed") else f"best: {best['candidate']} (untimed on cpu)")
                 if best else f"best: none ({no_best_line(summary)})",
                 f"{judged} in {summary['rounds']} rounds, "
                 f"{summary['budget_spent']['tokens']} tokens, {summary['budget_spent']['wall_s']:.1f}s",
                 f"run directory: {run_dir}"]
        self._print_final(lines)

    def close(self) -> None:
        self._stop.set()

    def _show_line(self, text: str) -> None:   # under the lock
        self._last_said = time.monotonic()
        self._say(text)

    # views
    def _say(self, text: str) -> None: ...
    def _show_generated(self, row: dict) -> None: ...
    def _show_started(self, row: dict) -> None: ...
    def _show_evaluated(self, row: dict) -> None: ...
    def _show_decided(self) -> None: ...
    def _print_final(self, lines: list[str]) -> None: ...


class QuietProgress(Progress):
    """For library callers (krefine bench) that draw their own display."""
    beats = False


class PlainProgress(Progress):
    """One line per event, for pipes, logs and CI."""

    def __init__(self, stream: TextIO | None = None) -> None:
        super().__init__()
        self.stream = stream or sys.stdout

    width = 100   # a longer line is wrapped between words, its continuation indented

    def _line(self, text: str) -> None:
        self._last_said = time.monotonic()
        print(textwrap.fill(text, self.width, subsequent_indent="    ", break_long_words=False,
                            break_on_hyphens=False), file=self.stream, flush=True)

    def _say(self, text: str) -> None:
        self._line(text)

    def _show_generated(self, row: dict) -> None:
        self._line(f"[round {row['round']}] {row['id']} generated (parent {row['parent']})")

    def _show_started(self, row: dict) -> None:
        self._line(f"[round {row['round']}] {row['id']} {row.get('started', 'judging')}"
                   + (f" ({row['note']})" if row["note"] else ""))

    def _show_evaluated(self, row: dict) -> None:
        extra = "  ".join(x for x in (row["bottleneck"], f"[{row['change']}]" if row.get("change") else "") if x)
        self._line(f"[round {row['round']}] {row['id']} {row['words']}" + (f"  {extra}" if extra else ""))

    def _show_decided(self) -> None:
        self._line(self.status_line)

    tick_s = 10.0   # a log gets one token-count line per 10 s, not one per token

    def _print_final(self, lines: list[str]) -> None:
        for line in lines:
            self._line(line)


class LiveProgress(Progress):
    """A rich table redrawn in place on a terminal."""

    def __init__(self, console: Console | None = None) -> None:
        super().__init__()
        self.console = console or Console()
        self.live = Live(self._table(), console=self.console, auto_refresh=False, transient=False)
        self.live.start()

    def _table(self) -> Table:
        # one line per candidate: the note takes what width is left and is cut, never wrapped
        table = Table(title="krefine", caption=self.status_line or None, expand=True)
        for name in ("round", "candidate", "parent", "verdict", "speedup e/c", "bottleneck"):
            table.add_column(name, no_wrap=True)
        table.add_column("note", no_wrap=True, overflow="ellipsis", ratio=1)
        for row in list(self.rows.values())[-_MAX_ROWS:]:
            style = _STYLE.get(row.get("verdict", ""), "")
            table.add_row(str(row["round"]), row["id"], row.get("parent", "-"),
                          f"[{style}]{row.get('verdict', '')}[/]" if style else row.get("verdict", ""),
                          row.get("speedup", "-"), row.get("bottleneck", ""), row.get("note", ""))
        return table

    def _redraw(self) -> None:
        self._last_said = time.monotonic()
        self.live.update(self._table(), refresh=True)

    def _show_generated(self, row: dict) -> None:
        self._redraw()

    def _show_started(self, row: dict) -> None:
        self._redraw()

    def _show_evaluated(self, row: dict) -> None:
        self._redraw()

    def _show_decided(self) -> None:
        self._redraw()

    def _say(self, text: str) -> None:
        self.live.console.print(text, highlight=False)

    def close(self) -> None:
        super().close()
        if self.live.is_started:
            self.live.stop()

    def _print_final(self, lines: list[str]) -> None:
        for line in lines:
            self.console.print(line, highlight=False)


def counting(backend: Any, progress: Progress, round_: int, count: int, limit: int, device: str) -> dict:
    """generate()'s keyword for a backend that reports its token count (a model loaded
    here); nothing for the others (a server, a replay file)."""
    if not getattr(backend, "counts_tokens", False):
        return {}
    return {"on_tokens": progress.token_ticker(round_, count, limit, device)}


def make_progress(enabled: bool = True, stream: TextIO | None = None) -> Progress:
    if not enabled:
        return QuietProgress()
    stream = stream or sys.stdout
    if stream.isatty():
        return LiveProgress(Console(file=stream))
    return PlainProgress(stream)
