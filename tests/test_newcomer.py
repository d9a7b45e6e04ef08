"""What a newcomer meets first (issue 48): `krefine` alone, a problem file that is not Python
or whose reference forward raises, a reason too long for one line, the device named first,
a verdict worded one way, progress through long silences, best.py outside krefine."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from agent.cli import main
from tests.run_fixtures import REPO

BROKEN_FORWARD = textwrap.dedent("""\
    import torch
    from torch import nn
    class Model(nn.Module):
        def forward(self, x):
            return x @ x
    def get_inputs():
        return [torch.randn(3, 4)]
    def get_init_inputs():
        return []
    """)


def test_krefine_alone_prints_its_usage_to_stderr_and_exits_2(capsys):
    assert main([]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: krefine") and "run" in err and "eval" in err


def test_a_problem_with_a_syntax_error_is_reported_by_run_without_importing_torch(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\nclass Model(torch.nn.Module)\n    pass\n")
    code = ("import sys; from agent.cli import main; rc = main(['run', sys.argv[1], '--out', sys.argv[2]]); "
            "assert 'torch' not in sys.modules, 'torch imported'; sys.exit(rc)")
    r = subprocess.run([sys.executable, "-c", code, str(bad), str(tmp_path / "run")], cwd=REPO,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    assert "not valid Python" in r.stderr and "line 2" in r.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("model", [["--model", "none", "--seed-kernel", "inductor"], []])
def test_a_reference_forward_that_raises_is_exit_2_before_a_run_directory(tmp_path, capsys, model):
    problem = tmp_path / "matmul.py"
    problem.write_text(BROKEN_FORWARD)
    out = tmp_path / "run"
    assert main(["run", str(problem), "--device", "cpu", "--out", str(out), *model]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(problem) in err
    assert "Model.forward" in err and "shapes cannot be multiplied" in err
    assert not out.exists()


def test_a_forward_the_meta_device_cannot_follow_still_loads(tmp_path):
    from tools.problem import load_problem
    problem = tmp_path / "dd.py"
    problem.write_text(BROKEN_FORWARD.replace("return x @ x", "return x[x > 0] * x.sum().item()"))
    assert load_problem(problem).name == "dd"


def test_the_first_line_of_a_cpu_run_says_it_runs_in_the_interpreter_untimed():
    import io
    from agent.loop.progress import PlainProgress
    out = io.StringIO()
    PlainProgress(out).started("relu", "cpu", "runs/x")
    first = out.getvalue().splitlines()[0]
    assert first.startswith("krefine: relu on cpu (Triton's interpreter)") and "nothing timed" in first


def test_a_judgement_silent_for_10_seconds_gets_a_heartbeat_naming_the_candidate_and_step(monkeypatch):
    import io
    from agent.loop.progress import PlainProgress
    clock = [100.0]
    monkeypatch.setattr("agent.loop.progress.time.monotonic", lambda: clock[0])
    out = io.StringIO()
    p = PlainProgress(out)
    p.beats = False                       # the test beats, not a thread
    p.judging({"id": "r00-c00", "round": 0, "parent": None})
    p.stepping("r00-c00", "test")
    clock[0] += 9
    p.beat()
    assert len(out.getvalue().splitlines()) == 1          # the judging line only
    clock[0] += 2
    p.beat()
    assert out.getvalue().splitlines()[-1] == "  … r00-c00 judging: test (the trials), 11 s"
    p.beat()                                              # just said: quiet for another 10 s
    assert len(out.getvalue().splitlines()) == 2


def test_the_run_and_inspect_word_each_verdict_the_same(tmp_path, capsys):
    import io
    from agent.loop.progress import PlainProgress
    from agent.loop.runstats import load_run
    from tests.run_fixtures import judged, loop_run
    out = io.StringIO()
    _, rd, _, _ = loop_run(tmp_path, [judged("incorrect"), judged("correct", 1.2)], progress=PlainProgress(out),
                           **{"budget.max_rounds": 2, "budget.candidates_per_round": 1})
    said = " ".join(out.getvalue().split())          # a long line is wrapped
    run = load_run(rd.root)
    assert len(run.candidates) == 2
    assert main(["inspect", str(rd.root)]) == 0
    shown = " ".join(capsys.readouterr().out.replace("│", " ").split())
    for c in run.candidates.values():
        words = " ".join(f"{c.id} {c.words}".split())
        assert words in said and words in shown, (words, said, shown)


def test_a_long_reason_is_wrapped_between_words_never_cut():
    import io
    from agent.loop.progress import PlainProgress
    reason = "not Triton; write the matmul as a tl.dot loop " * 6 + "dilation=(1, 1)"
    out = io.StringIO()
    PlainProgress(out)._line(f"best: none ({reason})")
    text = out.getvalue()
    assert " ".join(text.split()) == f"best: none ({reason})"
    assert all(len(line) <= 100 for line in text.splitlines())


def test_a_one_line_fault_is_cut_only_between_words():
    from tools.errors import describe_fault
    words = " ".join(f"word{i}" for i in range(400))
    line = describe_fault(RuntimeError(words))
    assert line.endswith(" …") and len(line) < 700
    assert line.removesuffix(" …").split()[-1] in words.split()
