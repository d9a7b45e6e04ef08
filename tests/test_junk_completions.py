"""What the loop does with the junk a real model writes: prose with no code block, code
cut off at the token limit inside an unclosed fence, one line repeated 200 times (prose
and code), a class named MyModel instead of ModelNew, and code with a syntax error.

One `krefine run` on CPU with a replay file of those six completions per round, two rounds,
beam width 6 so that every round-1 candidate is the parent of one round-2 candidate. Each
completion must end as a recorded verdict whose feedback says what was wrong, that feedback
must reach the next prompt, the budgets must count every completion, and nothing crashes.
A second run checks that the token budget stops a run of such completions.
"""
from __future__ import annotations

import json
import re

import pytest

from agent.loop.rundir import RunDir
from run_fixtures import cli, fast_config

_HEAD = "import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n\n\n"
_KERNEL = ("@triton.jit\ndef copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):\n"
           "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
           "    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)\n\n\n")
_BODY = ("    def __init__(self, dim, scale):\n        super().__init__()\n\n"
         "    def forward(self, x):\n        out = torch.empty_like(x)\n"
         "        copy_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)\n"
         "        return out\n")

# kind -> (completion, finish_reason, what the verdict's feedback must say)
JUNK = {
    "prose": ("I would fuse the bias add, the ReLU and the scale into one kernel, one block of "
              "elements per program.", "stop",
              r"no Python code defining ModelNew was found in the completion"),
    "truncated": ("Here is the kernel:\n```python\n" + _HEAD + _KERNEL.split("    tl.store")[0]
                  + "    x = tl.load(x_ptr + offs", "length",
                  r"SyntaxError: '\(' was never closed"),
    "repeated_prose": ("The kernel is fast.\n" * 200, "length",
                       r"no Python code defining ModelNew .*cut off at the token limit"),
    "repeated_code": ("```python\n" + "import torch\n" * 200, "length",
                      r"no @triton\.jit kernel|no ModelNew"),
    "wrong_class": ("```python\n" + _HEAD + _KERNEL + "class MyModel(nn.Module):\n" + _BODY + "```\n", "stop",
                    r"defines class MyModel, but the evaluator loads ModelNew"),
    "syntax_error": ("```python\n" + _HEAD + _KERNEL + "class ModelNew(nn.Module:\n" + _BODY + "```\n", "stop",
                     r"SyntaxError: invalid syntax"),
}
KINDS = list(JUNK)
ROUNDS = 2


def _replay(path, rounds: int):
    lines = [json.dumps({"completion": text, "finish_reason": finish})
             for _ in range(rounds) for text, finish, _ in JUNK.values()]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def junk_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("junk")
    config = fast_config(tmp, search={"strategy": "beam", "beam_width": len(JUNK)})
    out = tmp / "run"
    proc = cli("run", "examples/relu.py", "--config", str(config), "--device", "cpu",
               "--model", f"replay:{_replay(tmp / 'junk.jsonl', ROUNDS)}",
               "--candidates", str(len(JUNK)), "--max-iterations", str(ROUNDS), "--out", str(out))
    return proc, out


def _completions(run) -> list[dict]:
    return RunDir(run).completions()


def _kind_of(run, cid: str) -> str:
    """The junk kind of round-1 candidate `cid` (the replay hands them out in JUNK's order)."""
    return KINDS[int(cid.split("-c")[1])]


def test_a_run_of_junk_completions_ends_with_exit_1_and_no_traceback(junk_run):
    proc, run = junk_run
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert json.loads((run / "summary.json").read_text())["stop_reason"] == "max_rounds"


def test_every_junk_completion_has_a_verdict_and_an_evaluate_event(junk_run):
    _, run = junk_run
    cids = [c["candidate"] for c in _completions(run)]
    events = [json.loads(line) for line in (run / "trace.jsonl").read_text().splitlines()]
    judged = {e["candidate"] for e in events if e["node"] in ("compile", "test", "evaluate") and e["candidate"]}
    assert len(cids) == ROUNDS * len(JUNK)
    assert all((run / "evals" / f"{cid}.json").exists() for cid in cids)
    assert set(cids) <= judged


@pytest.mark.parametrize("kind", KINDS)
def test_the_verdict_of_a_junk_completion_says_what_was_wrong(junk_run, kind):
    _, run = junk_run
    verdict = json.loads((run / "evals" / f"r01-c{KINDS.index(kind):02d}.json").read_text())
    assert not verdict["correct"]
    assert re.search(JUNK[kind][2], verdict["feedback"]), verdict["feedback"]


@pytest.mark.parametrize("kind", KINDS)
def test_the_next_prompt_carries_the_junk_completions_feedback(junk_run, kind):
    _, run = junk_run
    parent = f"r01-c{KINDS.index(kind):02d}"
    children = [c["candidate"] for c in _completions(run) if c["parent"] == parent]
    verdict = json.loads((run / "evals" / f"{parent}.json").read_text())
    first_diagnostic = verdict["diagnostics"][0]["message"]
    assert len(children) == 1
    assert first_diagnostic in (run / "prompts" / f"{children[0]}.txt").read_text()


@pytest.mark.parametrize("kind", KINDS)
def test_the_verdicts_feedback_is_what_the_next_prompt_carries_and_inspect_shows(junk_run, kind, capsys, monkeypatch):
    from agent.cli import main
    _, run = junk_run
    parent = f"r01-c{KINDS.index(kind):02d}"
    child = next(c["candidate"] for c in _completions(run) if c["parent"] == parent)
    feedback = json.loads((run / "evals" / f"{parent}.json").read_text())["feedback"]
    monkeypatch.setenv("COLUMNS", "1000")
    main(["inspect", str(run), "--candidate", child])
    shown = capsys.readouterr().out
    assert feedback in (run / "prompts" / f"{child}.txt").read_text()
    assert all(line.strip() in shown for line in feedback.splitlines() if line.strip())


def test_the_feedback_on_code_cut_off_at_the_token_limit_says_it_was_cut_off(junk_run):
    _, run = junk_run
    verdict = json.loads((run / "evals" / f"r01-c{KINDS.index('truncated'):02d}.json").read_text())
    assert "token limit" in verdict["feedback"]


def test_the_budget_counts_every_junk_completion_and_its_tokens(junk_run):
    _, run = junk_run
    spent = json.loads((run / "summary.json").read_text())["budget_spent"]
    records = _completions(run)
    assert spent["candidates"] == len(records) == ROUNDS * len(JUNK) and spent["rounds"] == ROUNDS
    assert spent["tokens"] == sum(r["prompt_tokens"] + r["completion_tokens"] for r in records)


def test_the_token_budget_stops_a_run_of_junk_completions_after_the_round_that_spent_it(tmp_path):
    config = fast_config(tmp_path, budget={"token_budget": 1000})
    out = tmp_path / "run"
    proc = cli("run", "examples/relu.py", "--config", str(config), "--device", "cpu",
               "--model", f"replay:{_replay(tmp_path / 'junk.jsonl', 3)}",
               "--candidates", str(len(JUNK)), "--max-iterations", "3", "--out", str(out))
    summary = json.loads((out / "summary.json").read_text())
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert summary["stop_reason"] == "token_budget" and summary["rounds"] == 1
