"""agent/loop/rundir.py: the run directory's trace."""
from __future__ import annotations

import pytest

from agent.loop.rundir import RunDir
# --- the trace is read once per Run, then kept (the loop's nodes ask often)

def test_the_trace_file_is_read_once_however_often_nodes_ask(tmp_path, monkeypatch):
    from agent.loop import run as run_module
    from agent.loop.run import Run
    reads = []
    real = run_module.read_jsonl
    monkeypatch.setattr(run_module, "read_jsonl", lambda path: reads.append(path) or real(path))
    run = Run.create(RunDir(tmp_path / "run"), {})
    for i in range(50):
        run.generated(f"r01-c{i:02d}", parent=None, origin="model", code="x = 1\n")
        run.events()
        run.candidates()
    assert len(reads) <= 1 and len(run.events()) == 50


def test_a_new_run_object_sees_the_events_already_on_disk(tmp_path):
    from agent.loop.run import Run
    run = Run.create(RunDir(tmp_path / "run"), {})
    run.decided(0, None, "continue", duration_s=0.0, metrics={})
    again = Run(RunDir(tmp_path / "run"))
    again.decided(1, None, "max_rounds", duration_s=0.0, metrics={})
    assert [e["status"] for e in again.events()] == ["continue", "max_rounds"]
    assert [e["status"] for e in RunDir(tmp_path / "run").events()] == ["continue", "max_rounds"]


def test_each_writer_of_the_run_writes_once_when_a_node_runs_again(tmp_path):
    from agent.loop.run import Run
    run = Run.create(RunDir(tmp_path / "run"), {})
    for _ in range(2):
        run.generated("r01-c00", parent=None, origin="model", code="x = 1\n", prompt="p", completion="c")
        run.stepped("r01-c00", "compile", "ok", duration_s=0.1, metrics={})
        run.decided(1, None, "continue", duration_s=0.0, metrics={})
    assert [e["node"] for e in RunDir(tmp_path / "run").events()] == ["generate", "compile", "decide"]


# --- a completion is stored once (issue 20: completions.jsonl held a second copy)

def _texts(n: int) -> list[str]:
    from run_fixtures import judged
    return [judged("incorrect").replace("# judge", f"# completion {i}\n# judge") for i in range(n)]


def test_a_completions_text_is_in_exactly_one_file_of_the_run_directory(tmp_path):
    from run_fixtures import loop_run
    texts = _texts(4)
    _, rd, _, _ = loop_run(tmp_path, texts, **{"budget.candidates_per_round": 2, "budget.max_rounds": 2})
    files = [p for p in rd.root.rglob("*") if p.is_file()]
    for text in texts:
        holders = [p.relative_to(rd.root).as_posix() for p in files if text.encode() in p.read_bytes()]
        assert len(holders) == 1 and holders[0].startswith("completions/"), holders


def test_replay_of_a_run_directory_hands_out_its_completions_in_the_order_they_were_made(tmp_path):
    from agent.models.llm import ReplayBackend
    from run_fixtures import loop_run
    texts = _texts(4)
    _, rd, _, _ = loop_run(tmp_path, texts, **{"budget.candidates_per_round": 2, "budget.max_rounds": 2})
    assert [r["completion"] for r in ReplayBackend(rd.root).records] == texts


# --- a trace line torn by a kill is mended before the next session appends

@pytest.mark.parametrize("tail", ['{"schema": 1, "node": "gen', '{"schema": 1, "node": "decide", "status": "x"}'])
def test_an_append_after_a_torn_last_line_leaves_a_trace_every_reader_can_read(tmp_path, tail):
    from tools.jsonio import read_jsonl
    from agent.loop.run import Run
    rd = RunDir(tmp_path / "run")
    Run.create(rd, {}).decided(0, None, "continue", duration_s=0.0, metrics={})
    with open(rd.trace, "a", encoding="utf-8") as f:
        f.write(tail)                                    # the kill came before its newline
    kept = [e["status"] for e in read_jsonl(rd.trace)]   # what a reader makes of it now
    resumed = Run(RunDir(rd.root))
    for status in ("continue", "max_rounds"):
        resumed.decided(1, None, status, duration_s=0.0, metrics={})
    assert [e["status"] for e in read_jsonl(rd.trace)] == [*kept, "continue", "max_rounds"]
    assert [e["status"] for e in RunDir(rd.root).events()] == [*kept, "continue", "max_rounds"]


# --- one writer per run-directory file

_RUN_FILES = {"trace", "summary", "best", "meta", "report", "candidate_src", "prompt", "completion", "eval", "prescreen"}
_WRITES = {"write_json", "write_text_atomic", "append_jsonl", "write_text", "write_bytes", "unlink"}


def _run_dir_writes(path) -> list[str]:
    """Calls in `path` that write a file of the run directory's layout (RunDir's paths)."""
    import ast
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if name not in _WRITES:
            continue
        targets = [*node.args[:1], *([node.func.value] if isinstance(node.func, ast.Attribute) else [])]
        named = {n.attr for t in targets for n in ast.walk(t) if isinstance(n, ast.Attribute)}
        if named & _RUN_FILES:
            found.append(f"{path.name}:{node.lineno}")
    return found


def test_only_the_run_writes_the_run_directory_and_report_its_report_html():
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    writes = {str(p.relative_to(root)): _run_dir_writes(p) for p in sorted((root / "agent").rglob("*.py"))}
    assert {p for p, w in writes.items() if w} == {"agent/loop/run.py", "agent/cli/report.py"}, writes
    assert len(writes["agent/cli/report.py"]) == 1   # report.html, its own file
