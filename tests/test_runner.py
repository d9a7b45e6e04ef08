"""`krefine run` end to end in a subprocess: exit statuses, the run directory, and the
shipped replay story on CPU (examples/relu.replay.jsonl, real evaluator).
"""
from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from agent.models.llm import ReplayBackend
from agent.loop.progress import LiveProgress

from agent.loop.prompting import render_initial
from agent.loop.rundir import RunDir
from conftest import HAS_CUDA
from run_fixtures import REPO, TINY_PROBLEM, cli, cli_here, fast_config, write_replay
from tools.jsonio import read_json, write_json

NO_CODE = "I am sorry, I cannot help with that."


@pytest.fixture
def tiny(tmp_path):
    path = tmp_path / "tiny.py"
    path.write_text(TINY_PROBLEM)
    return path


def test_a_missing_problem_file_exits_2_with_one_line(tmp_path):
    r = cli_here("run", str(tmp_path / "nope.py"), "--model", "replay:x.jsonl", "--out", str(tmp_path / "run"))
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and "nope.py" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_a_non_finite_number_flag_exits_2_with_one_line(tmp_path, tiny, value):
    r = cli_here("run", str(tiny), "--model", "replay:x.jsonl", f"--target-speedup={value}",
            "--out", str(tmp_path / "run"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "finite" in r.stderr and not (tmp_path / "run").exists()


@pytest.mark.skipif(HAS_CUDA, reason="needs a machine without a GPU")
def test_device_cuda_without_a_gpu_exits_2_with_one_line_and_writes_nothing(tmp_path, tiny):
    r = cli_here("run", str(tiny), "--model", "none", "--seed-kernel", "inductor", "--device", "cuda",
            "--out", str(tmp_path / "run"))
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        "krefine: error: --device cuda but no CUDA device is visible (use --device cpu)"]
    assert not (tmp_path / "run").exists()


def test_a_flag_out_of_range_is_named_as_the_user_spelled_it(tmp_path, tiny):
    r = cli_here("run", str(tiny), "--model", "none", "--max-iterations", "-3", "--out", str(tmp_path / "run"))
    assert r.returncode == 2 and r.stderr.strip() == "krefine: error: --max-iterations must be at least 1, got -3"


def test_out_refuses_a_directory_that_is_not_empty(tmp_path, tiny):
    out = tmp_path / "run"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    r = cli_here("run", str(tiny), "--model", f"replay:{write_replay(tmp_path / 'r.jsonl', [NO_CODE])}", "--out", str(out))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "not empty" in r.stderr
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt"]


def test_a_backend_that_cannot_load_exits_2_with_one_line(tmp_path, tiny):
    r = cli_here("run", str(tiny), "--model", f"replay:{tmp_path / 'missing.jsonl'}", "--out", str(tmp_path / "run"))
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert not (tmp_path / "run").exists()


def test_a_model_that_cannot_load_fails_before_the_run_directory_is_made(tmp_path, tiny):
    r = cli_here("run", str(tiny), "--model", str(tmp_path / "no-such-model"), "--device", "cpu",
            "--out", str(tmp_path / "run"))
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and "--model" in r.stderr
    assert not (tmp_path / "run").exists()


def test_budget_spent_without_a_solution_exits_1(tmp_path, tiny):
    replay = write_replay(tmp_path / "r.jsonl", [NO_CODE])
    r = cli_here("run", str(tiny), "--model", f"replay:{replay}", "--device", "cpu", "--out", str(tmp_path / "run"))
    assert r.returncode == 1, r.stderr
    assert RunDir(tmp_path / "run").read_summary()["stop_reason"] == "replay_exhausted"


def test_the_default_run_directory_is_named_by_time_and_problem(tmp_path, tiny):
    config = fast_config(tmp_path, run={"out_root": str(tmp_path / "runs")})
    replay = write_replay(tmp_path / "r.jsonl", [NO_CODE])
    r = cli_here("run", str(tiny), "--config", str(config), "--model", f"replay:{replay}", "--device", "cpu")
    (run,) = (tmp_path / "runs").iterdir()
    assert r.returncode == 1 and run.name.endswith("-tiny") and run.name[:15].replace("-", "").isdigit()


def test_run_json_records_problem_source_config_model_and_device(tmp_path, tiny):
    replay = write_replay(tmp_path / "r.jsonl", [NO_CODE])
    cli_here("run", str(tiny), "--model", f"replay:{replay}", "--device", "cpu", "--candidates", "3",
        "--out", str(tmp_path / "run"))
    meta = read_json(RunDir(tmp_path / "run").meta)
    assert meta["problem"] == {"path": str(tiny), "name": "tiny", "source": TINY_PROBLEM}
    assert (meta["model"], meta["device"], meta["config"]["budget"]["candidates_per_round"]) == (
        f"replay:{replay}", "cpu", 3)


def test_non_tty_progress_is_one_line_per_event_and_a_final_summary(tmp_path, tiny):
    replay = write_replay(tmp_path / "r.jsonl", [NO_CODE])
    r = cli("run", str(tiny), "--model", f"replay:{replay}", "--device", "cpu", "--out", str(tmp_path / "run"))
    device, *lines = r.stdout.splitlines()
    assert device == "krefine: tiny on cpu (Triton's interpreter): correctness only, nothing timed"
    assert lines[0] == "[round 1] r01-c00 generated (parent -)"
    assert lines[1].startswith("[round 1] r01-c00 compile_error")
    assert "stop reason: replay_exhausted  solved: no" in lines


@pytest.mark.skipif(HAS_CUDA, reason="needs a machine without a GPU")
def test_resume_of_a_directory_that_is_no_run_exits_2_with_one_line(tmp_path):
    r = cli_here("resume", str(tmp_path))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "run.json" in r.stderr


def test_tty_progress_is_a_table_row_per_candidate():
    out = io.StringIO()
    progress = LiveProgress(Console(file=out, force_terminal=True, width=160))
    record = {"id": "r01-c00", "round": 1, "parent": None, "status": "correct",
              "speedup": {"eager": 1.5, "compile": 0.9}, "bottleneck": "memory-bound"}
    progress.generated(record)
    progress.evaluated(record, None)
    progress.close()
    text = out.getvalue()
    assert "r01-c00" in text and "1.50x / 0.90x" in text and "memory-bound" in text


# ---------------------------------------------------------------- the shipped story

def _story(tmp_path_factory, name: str, replay: str):
    """`krefine run examples/relu.py` with `replay`, one candidate per round, on CPU."""
    tmp = tmp_path_factory.mktemp(name)
    r = cli("run", "examples/relu.py", "--model", f"replay:{replay}", "--device", "cpu",
            "--candidates", "1", "--config", str(fast_config(tmp)), "--out", str(tmp / "run"))
    return r, RunDir(tmp / "run")


@pytest.fixture(scope="module")
def story(tmp_path_factory):
    """examples/relu.py with its hand-written replay."""
    return _story(tmp_path_factory, "story", "examples/relu.replay.jsonl")


@pytest.mark.slow
def test_story_ends_solved_at_the_first_correct_candidate(story):
    r, rd = story
    assert r.returncode == 0, r.stdout + r.stderr
    s = rd.read_summary()
    assert (s["stop_reason"], s["solved"], s["best"], s["candidates_evaluated"]) == (
        "target_reached", True, {"candidate": "r03-c00", "speedup": {"eager": None, "compile": None}}, 3)
    assert rd.best.read_text() == rd.candidate_src("r03-c00").read_text()


@pytest.mark.slow
def test_story_verdicts_walk_compile_error_then_wrong_output_then_correct(story):
    _, rd = story
    assert [read_json(rd.eval(f"r0{i}-c00"))["verdict"] for i in (1, 2, 3)] == ["compile_error", "incorrect", "correct"]


@pytest.mark.slow
def test_story_first_prompt_is_the_kernelllm_template(story):
    _, rd = story
    assert rd.prompt("r01-c00").read_text() == render_initial((REPO / "examples/relu.py").read_text())


@pytest.mark.slow
def test_story_second_prompt_carries_the_compile_error_and_its_line(story):
    _, rd = story
    prompt = rd.prompt("r02-c00").read_text()
    assert "Result: compile_error." in prompt
    assert "offending line: `y = tl.relu(x + b) * scale`" in prompt


@pytest.mark.slow
def test_story_third_prompt_carries_the_wrong_tail(story):
    _, rd = story
    prompt = rd.prompt("r03-c00").read_text()
    # outputs are NaN-poisoned, so the whole unwritten tail is wrong and named as one
    assert "Result: incorrect." in prompt and "all errors lie in the last 4095 elements" in prompt
    assert "grid = (n_elements // 4096,)" in prompt  # the parent it must fix


@pytest.mark.slow
def test_story_run_directory_replays_the_run(story):
    _, rd = story
    recorded = ReplayBackend(rd.root).records
    shipped = [json.loads(line) for line in (REPO / "examples/relu.replay.jsonl").read_text().splitlines()]
    assert [r["completion"] for r in recorded] == [s["completion"] for s in shipped[:3]]
    assert [r["candidate"] for r in recorded] == ["r01-c00", "r02-c00", "r03-c00"]


@pytest.mark.gpu
def test_story_on_a_gpu_refines_the_slow_kernel_with_its_timing_into_the_fast_one(tmp_path):
    # the model's story alone: no constant sweep of the slow kernel (tests/test_sweep_loop.py has that)
    config = tmp_path / "no_sweep.toml"
    config.write_text("[search]\nsweep_variants = 0\n")
    r = cli("run", "examples/relu.py", "--model", "replay:examples/relu.replay.jsonl", "--device", "cuda",
            "--candidates", "1", "--config", str(config), "--out", str(tmp_path / "run"))
    rd = RunDir(tmp_path / "run")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Speedup:" in rd.prompt("r04-c00").read_text()  # step 3's timing went into step 4's prompt
    s = rd.read_summary()
    assert (s["stop_reason"], s["best"]["candidate"]) == ("target_reached", "r04-c00")


# ---------------------------------------------------------------- the KernelBook-format story

@pytest.fixture(scope="module")
def kernelbook_story(tmp_path_factory):
    """examples/relu.py with examples/relu.kernelbook.replay.jsonl: KernelBook-format
    completions (a hard-coded xnumel, then the right one)."""
    return _story(tmp_path_factory, "kbstory", "examples/relu.kernelbook.replay.jsonl")


@pytest.mark.slow
def test_kernelbook_story_is_solved_by_its_second_candidate_delivered_portable(kernelbook_story):
    from agent.loop.extract import extract_code
    from tools.dialect.portable import portable
    r, rd = kernelbook_story
    assert r.returncode == 0, r.stdout + r.stderr
    s = rd.read_summary()
    assert (s["stop_reason"], s["best"]["candidate"]) == ("target_reached", "r02-c00")
    written = extract_code(rd.completion("r02-c00").read_text())
    assert "from torch._inductor.runtime.triton_heuristics import grid" in written
    assert rd.best.read_text() == portable(written) and "torch._inductor" not in rd.best.read_text()


@pytest.mark.slow
def test_kernelbook_story_feeds_the_hard_coded_xnumel_back_with_the_problems_size(kernelbook_story):
    _, rd = kernelbook_story
    assert read_json(rd.eval("r01-c00"))["verdict"] == "incorrect"
    prompt = rd.prompt("r02-c00").read_text()
    assert "xnumel = 256 is hard-coded" in prompt and "4194303 elements" in prompt


@pytest.mark.gpu
def test_kernelbook_story_on_a_gpu_reaches_the_target_with_the_converted_kernel(tmp_path):
    r = cli("run", "examples/relu.py", "--model", "replay:examples/relu.kernelbook.replay.jsonl",
            "--device", "cuda", "--candidates", "1", "--out", str(tmp_path / "run"))
    rd = RunDir(tmp_path / "run")
    assert r.returncode == 0, r.stdout + r.stderr
    assert read_json(rd.eval("r01-c00"))["verdict"] == "incorrect"
    s = rd.read_summary()
    assert (s["stop_reason"], s["best"]["candidate"]) == ("target_reached", "r02-c00")


def test_non_tty_progress_says_when_a_candidate_goes_to_the_judge(tmp_path, tiny):
    replay = write_replay(tmp_path / "r.jsonl", [(REPO / "tests/problems/relu_ok.py").read_text()])
    r = cli("run", str(tiny), "--model", f"replay:{replay}", "--device", "cpu", "--out", str(tmp_path / "run"))
    lines = r.stdout.splitlines()
    assert lines.index("[round 1] r01-c00 judging") == lines.index("[round 1] r01-c00 generated (parent -)") + 1


def test_non_tty_progress_says_the_seed_is_being_made_before_it_is(tmp_path, tiny):
    replay = write_replay(tmp_path / "r.jsonl", [NO_CODE])
    r = cli("run", str(tiny), "--model", f"replay:{replay}", "--device", "cpu", "--seed-kernel", "inductor",
            "--set", "search.seed_timeout_s=1", "--set", "search.seed_cache=\"\"", "--out", str(tmp_path / "run"))
    assert r.stdout.splitlines()[1].startswith("[round 0] r00-c00 making the Inductor seed (torch.compile")


def test_non_tty_progress_says_a_cached_seed_is_read_not_made(tmp_path, tiny):
    """The second run finds the first's result in the seed cache (here a kept timeout)."""
    replay = write_replay(tmp_path / "r.jsonl", [NO_CODE])
    args = ["--model", f"replay:{replay}", "--device", "cpu", "--seed-kernel", "inductor",
            "--set", "search.seed_timeout_s=1", "--set", f"search.seed_cache=\"{tmp_path / 'seeds'}\""]
    first = cli("run", str(tiny), *args, "--out", str(tmp_path / "run1"))
    second = cli("run", str(tiny), *args, "--out", str(tmp_path / "run2"))
    assert first.stdout.splitlines()[1].startswith("[round 0] r00-c00 making the Inductor seed (torch.compile")
    assert second.stdout.splitlines()[1] == "[round 0] r00-c00 reading the Inductor seed (from the seed cache)"


# --- krefine resume --set budget.KEY=VALUE: a raised budget lets a stopped run go on (issue 20)

@pytest.fixture(scope="module")
def _one_round_run_made(tmp_path_factory):
    out = tmp_path_factory.mktemp("one_round") / "run"
    r = cli("run", str(REPO / "examples" / "relu.py"), "--model", f"replay:{REPO / 'examples' / 'relu.replay.jsonl'}",
            "--candidates", "1", "--max-iterations", "1", "--device", "cpu", "--out", str(out))
    assert RunDir(out).read_summary()["stop_reason"] == "max_rounds", r.stderr
    return out


@pytest.fixture
def one_round_run(_one_round_run_made, tmp_path):
    """A copy of one run stopped by its round budget (made once: each test resumes its own copy)."""
    import shutil
    return Path(shutil.copytree(_one_round_run_made, tmp_path / "run"))


@pytest.fixture(scope="module")
def raised_run(_one_round_run_made, tmp_path_factory):
    """A copy of the one-round run resumed with its round budget raised to 2."""
    import shutil
    run = Path(shutil.copytree(_one_round_run_made, tmp_path_factory.mktemp("raised") / "run"))
    cli("resume", str(run), "--set", "budget.max_rounds=2")
    return run


def test_resume_with_a_raised_round_budget_runs_the_next_round(raised_run):
    summary = RunDir(raised_run).read_summary()
    assert (summary["rounds"], summary["candidates_evaluated"]) == (2, 2)


def test_resume_of_a_run_cut_off_after_its_last_decide_writes_its_summary(one_round_run):
    """Ctrl-C or a bench's time limit between the stopping decide event and summary.json (the
    final best's profile runs there): the resumed run finishes that step instead of staying
    "interrupted" for every later resume."""
    rd = RunDir(one_round_run)
    done = rd.read_summary()
    rd.summary.unlink()
    r = cli_here("resume", str(one_round_run))
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr   # 1: not solved, as the run it resumes
    again = rd.read_summary()
    assert again is not None and {k: again[k] for k in ("stop_reason", "best", "rounds")} == \
        {k: done[k] for k in ("stop_reason", "best", "rounds")}


def test_resume_of_a_run_its_budget_stopped_says_how_to_give_it_more(one_round_run):
    r = cli_here("resume", str(one_round_run))
    assert f"to go on: krefine resume {one_round_run} --set budget.max_rounds=2" in r.stdout


def test_resume_keeps_the_raised_budget_in_run_json(raised_run):
    assert read_json(RunDir(raised_run).meta)["config"]["budget"]["max_rounds"] == 2


def test_resume_may_change_only_the_budget(one_round_run):
    r = cli_here("resume", str(one_round_run), "--set", "sampling.temperature=1")
    assert r.returncode == 2 and r.stderr.strip().endswith("only [budget] values (budget.KEY=VALUE) can change when a run resumes")


def test_resume_refuses_to_lower_a_budget_and_keeps_run_json(one_round_run):
    before = RunDir(one_round_run).meta.read_text()
    budget = read_json(RunDir(one_round_run).meta)["config"]["budget"]
    r = cli_here("resume", str(one_round_run), "--set", f"budget.time_budget_s={budget['time_budget_s'] / 2:g}")
    assert r.returncode == 2 and "a resumed run's budget can only be raised" in r.stderr
    assert RunDir(one_round_run).meta.read_text() == before


def test_resume_of_a_run_with_a_damaged_eval_file_names_it_and_writes_nothing(one_round_run):
    rd = RunDir(one_round_run)
    damaged = next((rd.root / "evals").glob("*.json"))
    damaged.write_text("[1]")
    before = rd.trace.read_text()
    r = cli_here("resume", str(one_round_run))
    assert r.returncode == 2 and r.stderr.strip().endswith(f"{damaged}: not a JSON object")
    assert rd.trace.read_text() == before


def test_model_none_alone_runs_the_inductor_seed(tmp_path, tiny, monkeypatch):
    """`--model none` has one thing to do: the seed and its sweep, without naming --seed-kernel."""
    import agent.cli.runcmd as runcmd
    seen = []
    monkeypatch.setattr(runcmd, "run_problem", lambda path, config, out, **kw: seen.append(config) or {"solved": True})
    r = cli_here("run", str(tiny), "--model", "none", "--device", "cpu", "--out", str(tmp_path / "run"))
    assert r.returncode == 0, r.stderr
    assert seen[0].search.seed_kernel == "inductor"



def test_a_seed_cache_that_cannot_be_made_is_bad_input_before_the_run_starts(tmp_path, capsys):
    from agent.cli import main
    (tmp_path / "f").write_text("a file, not a directory")
    problem = Path(__file__).parent / "problems" / "relu.py"
    assert main(["run", str(problem), "--device", "cpu", "--model", "none", "--seed-kernel", "inductor",
                 "--set", f"search.seed_cache={tmp_path / 'f' / 'cache'}", "--out", str(tmp_path / "run")]) == 2
    assert "[search] seed_cache cannot be made" in capsys.readouterr().err and not (tmp_path / "run").exists()
