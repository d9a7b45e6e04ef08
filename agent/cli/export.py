"""`krefine export RUN_DIR [--kernel [CANDIDATE]] [-o FILE]`: a kernel to take away (the
default), and
`krefine export RUN_DIR --chrome-trace [-o FILE]`: a run's node spans as a trace.

--kernel writes the run's best.py (or candidates/CANDIDATE.py) byte for byte: the text the
judge judged, a standalone module that imports only torch, triton and what Triton ships
(tools/dialect/portable.py); without -o it goes to stdout, alone there, so
`krefine export RUN --kernel > kernel.py` works. A candidate that was not judged correct
is written too, with a note on stderr saying so; one that calls a libdevice function
Triton's interpreter lacks, with a note that it needs a GPU (its import line says so too).

--chrome-trace writes the Chrome Trace Event format (JSON object form), which chrome://tracing and
https://ui.perfetto.dev open: one complete ("X") event per trace.jsonl event, one
thread per candidate so a round's parallel evaluations show side by side, a "loop"
thread for the decide node and a "rounds" thread spanning each round.
Times are microseconds from the run's first span. Default output:
RUN_DIR/trace.chrome.json. Does not read anything but trace.jsonl (via runstats).
"""
from __future__ import annotations

import sys
from pathlib import Path

from agent.loop.runstats import RunSnapshot, Span, load_run, node_spans
from tools.dialect.interp_math import gpu_only
from tools.errors import BadInput, check_writable
from tools.jsonio import write_json

PID = 1
LOOP_TID, ROUNDS_TID = 1, 2   # candidate threads follow from 3, in id order


def main(args) -> int:
    run = load_run(args.run_dir)
    if args.out is not None:
        check_writable(args.out, "-o", directory=False)
    if args.kernel is not None or not args.chrome_trace:   # the kernel unless the trace is asked for
        return export_kernel(run, args.kernel or "best", args.out)
    out = Path(args.out) if args.out else run.dir.root / "trace.chrome.json"
    check_writable(out, "the trace file", directory=False)
    trace = chrome_trace(run)
    write_json(out, trace)
    spans = sum(1 for e in trace["traceEvents"] if e["ph"] == "X")
    print(f"wrote {out}: {spans} spans; open it in https://ui.perfetto.dev or chrome://tracing")
    return 0


def export_kernel(run: RunSnapshot, which: str, out: str | None) -> int:
    """Write candidate `which` ("best": the run's best.py) as judged; BadInput when there is none."""
    if which == "best":
        path = run.dir.best
        if not path.exists():
            raise BadInput(run.dir.root, "no best.py: the run has no correct candidate yet "
                           f"(`krefine inspect {run.dir.root}` lists its candidates; export one with --kernel ID)")
        cid = ((run.summary or {}).get("best") or {}).get("candidate") or "best"
    else:
        cid, path = which, run.dir.candidate_src(which)
        if which not in run.candidates or not path.exists():   # an id, never a path out of the run
            known = ", ".join(c for c in run.candidates if run.dir.candidate_src(c).exists()) or "none"
            raise BadInput(run.dir.root, f"no candidate {which!r} with code in this run (candidates: {known})")
    text = path.read_bytes()
    status = run.candidates[cid].status if cid in run.candidates else "correct"   # best.py: the run's best
    needs_gpu = gpu_only(text.decode("utf-8", "replace"))
    if out is None:
        sys.stdout.buffer.write(text)
        sys.stdout.flush()
    else:
        try:
            Path(out).write_bytes(text)
        except OSError as e:
            raise BadInput(out, f"-o: cannot write it: {e.strerror or e}") from None
        speed = (run.candidates[cid].speedup.get("eager") if cid in run.candidates else None)
        print(f"wrote {out}: candidate {cid}, {status}"
              + (f", {speed:.2f}x eager" if isinstance(speed, (int, float)) else "")
              + "; it imports only torch and triton" + ("" if needs_gpu else ", and runs wherever Triton does"))
    if needs_gpu:   # a bare TRITON_INTERPRET=1 has no libdevice (tools/dialect/interp_math.py)
        print(f"krefine: note: candidate {cid} needs a GPU: it calls "
              f"{', '.join(f'libdevice.{f}' for f in needs_gpu)}, which Triton's interpreter "
              "(TRITON_INTERPRET=1, a CPU) lacks", file=sys.stderr)
    if status != "correct":
        print(f"krefine: note: candidate {cid} was judged {status}, not correct", file=sys.stderr)
    return 0


def chrome_trace(run: RunSnapshot) -> dict:
    spans = node_spans(run)
    t0 = min((s.start_s for s in spans), default=0.0)
    def us(t: float) -> float:  # ts and dur both from these, so back-to-back spans meet exactly
        return round((t - t0) * 1e6, 3)
    lanes = sorted({_lane(s) for s in spans} - {None})
    tids = {cid: ROUNDS_TID + 1 + i for i, cid in enumerate(lanes)}
    # 1) names and order of the process and its threads
    events: list[dict] = [_meta("process_name", 0, {"name": f"krefine run {run.dir.run_id}"})]
    for name, tid in (("loop", LOOP_TID), ("rounds", ROUNDS_TID), *tids.items()):
        events.append(_meta("thread_name", tid, {"name": name}))
        events.append(_meta("thread_sort_index", tid, {"sort_index": tid}))
    # 2) one span per round, from its first node's start to its last node's end
    for r in sorted({s.iteration for s in spans}):
        in_round = [s for s in spans if s.iteration == r]
        start, end = min(s.start_s for s in in_round), max(s.end_s for s in in_round)
        events.append({"name": f"round {r}", "cat": "round", "ph": "X", "pid": PID, "tid": ROUNDS_TID,
                       "ts": us(start), "dur": round(us(end) - us(start), 3), "args": {"iteration": r}})
    # 3) every node
    for s in spans:
        e = s.event
        events.append({"name": s.node, "cat": s.node,
                       "ph": "X", "pid": PID, "tid": tids.get(_lane(s), LOOP_TID),
                       "ts": us(s.start_s), "dur": round(us(s.end_s) - us(s.start_s), 3),
                       "args": {"candidate": s.candidate, "iteration": s.iteration, "status": s.status,
                                "metrics": e.get("metrics") or {}, "error": e.get("error"),
                                "artifacts": e.get("artifacts") or {}}})
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"run_id": run.dir.run_id, "start_unix_s": t0}}


def _lane(s: Span) -> str | None:
    """The candidate thread a span goes on; None: the loop thread. decide names the best
    candidate but is the loop's own step."""
    return s.candidate if s.candidate and s.node != "decide" else None


def _meta(name: str, tid: int, args: dict) -> dict:
    return {"name": name, "ph": "M", "pid": PID, "tid": tid, "args": args}
