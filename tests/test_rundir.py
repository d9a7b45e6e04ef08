"""agent/rundir.py: the run directory's trace."""
from __future__ import annotations

from agent.rundir import RunDir
# --- the trace is read once per RunDir, then kept (issue 20: the loop's nodes re-read it)

def test_the_trace_file_is_read_once_however_often_nodes_ask(tmp_path, monkeypatch):
    from agent import rundir as rundir_module
    reads = []
    real = rundir_module.read_jsonl
    monkeypatch.setattr(rundir_module, "read_jsonl", lambda path: reads.append(path) or real(path))
    rd = RunDir(tmp_path / "run").create()
    for i in range(50):
        rd.append_event(iteration=1, candidate=f"r01-c{i:02d}", node="generate", status="ok")
        list(rd.events())
        rd.last_event()
    assert len(reads) <= 1 and len(list(rd.events())) == 50


def test_a_new_rundir_object_sees_the_events_already_on_disk(tmp_path):
    rd = RunDir(tmp_path / "run").create()
    rd.append_event(iteration=0, candidate=None, node="decide", status="continue")
    again = RunDir(tmp_path / "run")
    again.append_event(iteration=1, candidate=None, node="decide", status="max_rounds")
    assert [e["status"] for e in again.events()] == ["continue", "max_rounds"]
    assert again.last_event()["status"] == "max_rounds"
