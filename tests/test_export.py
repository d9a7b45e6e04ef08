"""`krefine export --chrome-trace`: one Chrome/Perfetto span per trace.jsonl event."""
from __future__ import annotations

import json

import pytest

from agent.cli import main
from agent.cli.export import chrome_trace
from agent.loop.runstats import load_run
from fixtures.runs.builder import build_run, recorded, story


@pytest.fixture
def run(tmp_path):
    build_run(tmp_path / "run", story())
    return load_run(tmp_path / "run")


def node_spans(trace: dict) -> list[dict]:
    return [e for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] != "round"]


def test_every_trace_event_becomes_one_span(run):
    assert sorted((e["name"], e["args"]["candidate"] or "") for e in node_spans(chrome_trace(run))) == \
        sorted((e["node"], e["candidate"] or "") for e in run.events)


def test_span_duration_is_the_events_duration_in_microseconds(run):
    durations = {(e["args"]["candidate"], e["name"]): e["dur"] for e in node_spans(chrome_trace(run))}
    assert (durations[("r03-c00", "generate")], durations[("r03-c00", "profile")]) == (2e6, 1e6)


def test_generate_span_ends_at_the_events_timestamp(run):
    trace = chrome_trace(run)
    t0 = trace["otherData"]["start_unix_s"]
    ends = [round(t0 + (e["ts"] + e["dur"]) / 1e6, 3) for e in node_spans(trace) if e["name"] == "generate"]
    assert ends == [round(e["ts"], 3) for e in run.events if e["node"] == "generate"]


def test_evaluation_phases_written_together_are_laid_back_to_back(run):
    # the loop traces compile, test, profile in one burst after the verdict: same ts
    phases = [e for e in node_spans(chrome_trace(run)) if e["args"]["candidate"] == "r03-c00"
              and e["name"] in ("compile", "test", "profile")]
    assert [e["name"] for e in phases] == ["compile", "test", "profile"]
    assert [e["ts"] + e["dur"] - phases[0]["ts"] for e in phases] == pytest.approx([1e6, 2e6, 3e6])


def test_decide_goes_on_the_loop_thread_although_it_names_the_best(run):
    trace = chrome_trace(run)
    loop = next(e["tid"] for e in trace["traceEvents"] if e["ph"] == "M" and e["args"].get("name") == "loop")
    assert {e["tid"] for e in node_spans(trace) if e["name"] == "decide"} == {loop}


def test_each_candidate_has_its_own_thread(run):
    spans = node_spans(chrome_trace(run))
    tid = {}
    for e in spans:
        if e["args"]["candidate"] and e["name"] != "decide":
            tid.setdefault(e["args"]["candidate"], set()).add(e["tid"])
    assert all(len(t) == 1 for t in tid.values()) and len({min(t) for t in tid.values()}) == len(tid)


def test_round_span_covers_its_nodes(run):
    trace = chrome_trace(run)
    r2 = next(e for e in trace["traceEvents"] if e["name"] == "round 2")
    inside = [e for e in node_spans(trace) if e["args"]["iteration"] == 2]
    assert (r2["ts"], r2["ts"] + r2["dur"]) == pytest.approx(
        (min(e["ts"] for e in inside), max(e["ts"] + e["dur"] for e in inside)))


def test_cli_writes_trace_into_the_run_dir_by_default(run, capsys):
    assert main(["export", str(run.dir.root), "--chrome-trace"]) == 0
    written = json.loads((run.dir.root / "trace.chrome.json").read_text())
    assert len(node_spans(written)) == len(run.events)


def test_cli_out_names_the_file(run, tmp_path):
    main(["export", str(run.dir.root), "--chrome-trace", "--out", str(tmp_path / "t.json")])
    assert "traceEvents" in json.loads((tmp_path / "t.json").read_text())


def test_export_of_missing_run_dir_exits_2(tmp_path, capsys):
    assert main(["export", str(tmp_path / "gone"), "--chrome-trace"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_recorded_run_spans_on_one_thread_never_overlap(tmp_path):
    spans = sorted(node_spans(chrome_trace(load_run(recorded(tmp_path)))), key=lambda e: (e["tid"], e["ts"]))
    overlaps = [(a["name"], b["name"]) for a, b in zip(spans, spans[1:])
                if a["tid"] == b["tid"] and a["ts"] + a["dur"] > b["ts"] + 1e-3]
    assert overlaps == []


def test_a_kernel_id_is_never_a_path_out_of_the_run(run, tmp_path, capsys):
    outside = tmp_path / "elsewhere.py"
    outside.write_text("class ModelNew: pass\n")
    rel = "../../" + outside.stem   # candidates/<id>.py would name the file outside
    assert (run.dir.root / "candidates" / f"{rel}.py").resolve() == outside.resolve()
    assert main(["export", str(run.dir.root), "--kernel", rel, "-o", str(tmp_path / "k.py")]) == 2
    assert "no candidate" in capsys.readouterr().err and not (tmp_path / "k.py").exists()
