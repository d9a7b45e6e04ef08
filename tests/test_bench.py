"""`krefine bench`: discovery, filter, resume, sweeps, results files, scores, GPU workers.

The loop itself is replaced by a fake `run_problem` that writes a run dir with
tests/fixtures/runs/builder.py, so these tests check bench, not the loop.
"""
from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest

from agent.bench import suite as bench
from agent.cli import main
from fixtures.runs.builder import build_run, story
from tools.errors import BadInput

KB = Path(os.environ.get("KREFINE_KERNELBENCH", Path(__file__).resolve().parents[2] / "kb")) / "KernelBench"
PROBLEM = "import torch\n\nclass Model(torch.nn.Module):\n    pass\n"


@pytest.fixture
def suite(tmp_path) -> Path:
    d = tmp_path / "suite"
    d.mkdir()
    for name in ("1_relu", "10_gelu", "2_add"):
        (d / f"{name}.py").write_text(PROBLEM)
    (d / "helpers.py").write_text("def f(): pass\n")          # not a problem: no class Model
    (d / "__init__.py").write_text("")
    return d


@pytest.fixture
def calls(monkeypatch) -> list[dict]:
    """Replace the loop: round r of story() per budget round; solved when r03-c00 is reached."""
    seen: list[dict] = []
    def fake_run_problem(problem_path, config, out_dir, *, model_spec=None, progress=True):
        seen.append({"problem": Path(problem_path).stem, "max_rounds": config.budget.max_rounds,
                     "model": config.model.id, "out": Path(out_dir)})   # --model is [model] id
        if "bad" in Path(problem_path).stem:
            raise BadInput(problem_path, "get_inputs raised ValueError")
        rounds = config.budget.max_rounds if "gelu" not in str(problem_path) else 1
        cands = [c for c in story() if int(c.cid[1:3]) <= rounds]
        solved = any(c.cid == "r03-c00" for c in cands)
        build_run(Path(out_dir), cands, solved=solved, stop_reason="target_reached" if solved else "max_rounds")
        return {}
    monkeypatch.setattr("agent.loop.runner.run_problem", fake_run_problem)
    return seen


def bench_main(*argv) -> int:
    return main(["bench", *map(str, argv)])


def test_finds_problem_files_in_natural_order_skipping_non_problems(suite):
    assert [name for name, _ in bench.find_problems(suite, [])] == ["1_relu", "2_add", "10_gelu"]


@pytest.mark.skipif(not KB.is_dir(), reason="no KernelBench checkout (set KREFINE_KERNELBENCH)")
def test_kernelbench_level1_is_a_suite_as_it_is():
    names = [name for name, _ in bench.find_problems(KB / "level1", [])]
    assert (len(names), names[0], names[-1]) == (100, "1_Square_matrix_multiplication_", "100_HingeLoss")


def test_filter_keeps_names_matching_any_pattern(suite):
    assert [n for n, _ in bench.find_problems(suite, ["relu", "^2_"])] == ["1_relu", "2_add"]


def test_suite_without_problems_is_bad_input(tmp_path):
    with pytest.raises(BadInput, match="no problem files"):
        bench.find_problems(tmp_path, [])


def test_missing_suite_exits_2_naming_it(tmp_path, capsys):
    assert bench_main(tmp_path / "gone") == 2
    assert capsys.readouterr().err == f"krefine: error: {tmp_path / 'gone'}: no such suite directory\n"


def test_a_file_given_as_the_suite_is_named_as_not_a_directory(tmp_path, capsys):
    (tmp_path / "relu.py").write_text("x = 1\n")
    assert bench_main(tmp_path / "relu.py") == 2
    assert "relu.py: not a directory; a suite is a directory of problem files" in capsys.readouterr().err


def test_unknown_sweep_key_fails_before_any_run(suite, calls, tmp_path, capsys):
    assert bench_main(suite, "--out", tmp_path / "out", "--sweep", "budget.max_roundz=1,2") == 2
    assert calls == [] and "max_roundz" in capsys.readouterr().err


def test_runs_every_problem_into_its_own_run_dir(suite, calls, tmp_path):
    assert bench_main(suite, "--out", tmp_path / "out", "--device", "cpu") == 0
    assert [c["out"].relative_to(tmp_path / "out") for c in calls] == [
        Path("default/1_relu"), Path("default/2_add"), Path("default/10_gelu")]


def test_second_run_skips_problems_with_summary(suite, calls, tmp_path):
    bench_main(suite, "--out", tmp_path / "out", "--device", "cpu")
    calls.clear()
    bench_main(suite, "--out", tmp_path / "out", "--device", "cpu")
    assert calls == []


def test_interrupted_run_dir_is_resumed_not_restarted(suite, calls, tmp_path, monkeypatch):
    resumed = []
    monkeypatch.setattr("agent.loop.runner.resume_run", lambda d, progress=True: resumed.append(Path(d)))
    build_run(tmp_path / "out" / "default" / "2_add", story()[:2], write_summary=False)
    bench_main(suite, "--out", tmp_path / "out", "--device", "cpu")
    assert (resumed, [c["problem"] for c in calls]) == ([tmp_path / "out" / "default" / "2_add"], ["1_relu", "10_gelu"])


def test_empty_run_dir_skeleton_left_by_a_kill_is_started_fresh(suite, calls, tmp_path):
    (tmp_path / "out" / "default" / "1_relu" / "evals").mkdir(parents=True)
    bench_main(suite, "--out", tmp_path / "out", "--device", "cpu", "--filter", "relu")
    assert (tmp_path / "out" / "default" / "1_relu" / "summary.json").exists()


def test_model_spec_gets_each_problems_name(suite, calls, tmp_path):
    bench_main(suite, "--out", tmp_path / "out", "--device", "cpu", "--model", "replay:r/{problem}.jsonl")
    assert [c["model"] for c in calls] == ["replay:r/1_relu.jsonl", "replay:r/2_add.jsonl", "replay:r/10_gelu.jsonl"]


def test_sweep_runs_every_problem_under_each_setting(suite, calls, tmp_path):
    bench_main(suite, "--out", tmp_path / "out", "--device", "cpu", "--filter", "relu",
               "--sweep", "budget.max_rounds=1,3")
    assert [(c["max_rounds"], c["out"].parent.name) for c in calls] == [
        (1, "budget.max_rounds=1"), (3, "budget.max_rounds=3")]


def test_bad_problem_is_reported_and_the_others_still_run(suite, calls, tmp_path):
    (suite / "3_bad.py").write_text(PROBLEM)
    assert bench_main(suite, "--out", tmp_path / "out", "--device", "cpu") == 0
    rows = list(csv.DictReader((tmp_path / "out" / "results.csv").open()))
    assert {r["problem"]: r["error"] for r in rows} == {
        "1_relu": "", "2_add": "", "3_bad": f"bad input: {suite / '3_bad.py'}: get_inputs raised ValueError",
        "10_gelu": ""}


def test_results_csv_has_a_row_per_setting_and_problem(suite, calls, tmp_path):
    bench_main(suite, "--out", tmp_path / "out", "--device", "cpu", "--sweep", "budget.max_rounds=2,3")
    rows = list(csv.DictReader((tmp_path / "out" / "results.csv").open()))
    assert [(r["setting"], r["problem"], r["solved"]) for r in rows] == [
        ("budget.max_rounds=2", "1_relu", "False"), ("budget.max_rounds=2", "2_add", "False"),
        ("budget.max_rounds=2", "10_gelu", "False"), ("budget.max_rounds=3", "1_relu", "True"),
        ("budget.max_rounds=3", "2_add", "True"), ("budget.max_rounds=3", "10_gelu", "False")]


def test_results_json_scores_match_hand_computed_values(suite, calls, tmp_path):
    # relu and add solved at 1.45x eager / 1.10x compile after 6 candidates; gelu: 2 failures
    bench_main(suite, "--out", tmp_path / "out", "--device", "cpu", "--set", "budget.max_rounds=3")
    sc = json.loads((tmp_path / "out" / "results.json").read_text())["settings"][0]["scores"]
    assert sc["fast_p"] == {"eager": {"0": 2 / 3, "1": 2 / 3, "1.5": 0.0, "2": 0.0},
                            "compile": {"0": 2 / 3, "1": 2 / 3, "1.5": 0.0, "2": 0.0}}
    # pass@1 over all: relu, add 2 correct of 6 each, gelu 0 of 2
    assert sc["pass_at_k"]["all"]["1"] == {"mean": pytest.approx((1 / 3 + 1 / 3 + 0) / 3), "problems": 3}
    assert [share for b, share in sc["budget_curve"]] == [0, 0, 0, 0, 0, pytest.approx(2 / 3)]


def test_bench_html_overlays_one_budget_curve_per_setting(suite, calls, tmp_path):
    bench_main(suite, "--out", tmp_path / "out", "--device", "cpu", "--sweep", "budget.max_rounds=2,3")
    html = (tmp_path / "out" / "bench.html").read_text()
    assert html.count("<polyline") == 2 and "budget.max_rounds=2: 4, 0%" in html and "budget.max_rounds=3: 6, 67%" in html


def test_one_worker_per_visible_gpu(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    assert (bench.visible_gpus("cuda", None), bench.visible_gpus("cuda", 1)) == (["3", "5"], ["3"])


def test_cpu_or_the_only_gpu_runs_in_this_process(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    assert (bench.visible_gpus("cuda", None), bench.visible_gpus("cpu", None)) == ([None], [None])


@pytest.mark.slow
def test_each_worker_process_sees_only_its_own_gpu(tmp_path):
    """Two spawned workers; each problem file reports the CUDA_VISIBLE_DEVICES it was loaded under."""
    suite = tmp_path / "suite"
    suite.mkdir()
    for i in range(4):
        (suite / f"{i}_p.py").write_text(
            "import os, time\nclass Model: pass\ndef get_inputs(): return []\ndef get_init_inputs(): return []\n"
            "time.sleep(1.5)  # so one worker cannot take every problem before the other has started\n"
            "raise RuntimeError('gpu=' + os.environ.get('CUDA_VISIBLE_DEVICES', ''))\n")
    jobs = [bench.Job(bench.Setting("default", {"run.device": "cpu"}), path, name, tmp_path / "out" / name)
            for name, path in bench.find_problems(suite, [])]
    errors = bench.run_jobs(jobs, ["7", "9"], None, None, bench.Console(quiet=True))
    seen = sorted(e.split("gpu=")[1][0] for e in errors.values())
    assert len(errors) == 4 and set(seen) == {"7", "9"}


@pytest.mark.parametrize("flags, error", [
    (("--set", "budget.max_rounds=0"), "--set budget.max_rounds must be at least 1, got 0"),
    (("--sweep", "sampling.top_p=0.5,2"), "--sweep sampling.top_p must be in (0, 1], got 2"),
])
def test_a_bad_set_or_sweep_value_is_blamed_on_the_flag_before_any_run(suite, calls, tmp_path, capsys, flags, error):
    assert bench_main(suite, "--out", tmp_path / "out", *flags) == 2
    assert calls == [] and capsys.readouterr().err == f"krefine: error: {error}\n"


# --- a model server that is down: one try for the whole bench, one line a problem, not exit 0

@pytest.fixture
def dead_server_bench(tmp_path, monkeypatch, capsys):
    """A real bench of three real problems against a port nobody listens on; every
    request to it counted."""
    import socket
    import urllib.request
    suite = tmp_path / "suite"
    suite.mkdir()
    relu = (Path(__file__).parent / "problems" / "relu.py").read_text()
    for name in ("1_a", "2_b", "3_c"):
        (suite / f"{name}.py").write_text(relu)
    with socket.socket() as s:     # a free port, closed again: connections to it are refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    asked = []
    real = urllib.request.urlopen
    monkeypatch.setattr(urllib.request, "urlopen", lambda req, **kw: asked.append(req.full_url) or real(req, **kw))
    code = bench_main(suite, "--out", tmp_path / "out", "--device", "cpu", "--model", f"openai:http://127.0.0.1:{port}")
    return code, asked, capsys.readouterr().out


def test_a_bench_where_no_problem_could_run_for_an_unreachable_model_is_exit_2(dead_server_bench):
    code, _, _ = dead_server_bench
    assert code == 2


def test_a_model_server_that_refused_the_connection_is_asked_once_per_bench(dead_server_bench):
    _, asked, _ = dead_server_bench
    assert len(asked) == 1


def test_each_problem_of_a_bench_gets_one_line(dead_server_bench):
    _, _, out = dead_server_bench
    lines = out.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("[1/3]"))
    assert [ln[:5] for ln in lines[start:start + 4]] == ["[1/3]", "[2/3]", "[3/3]", "     "]
    assert "Connection refused" in lines[start] and "not asked again" in lines[start + 1]


def test_a_bench_where_every_problem_failed_in_the_evaluator_is_exit_3(suite, tmp_path, monkeypatch):
    from tools.errors import EvaluatorError
    def broken(*args, **kwargs):
        raise EvaluatorError("worker could not start")
    monkeypatch.setattr("agent.loop.runner.run_problem", broken)
    assert bench_main(suite, "--out", tmp_path / "out", "--device", "cpu") == 3


def test_a_model_server_url_without_a_scheme_fails_before_any_run(suite, calls, tmp_path, capsys):
    assert bench_main(suite, "--out", tmp_path / "out", "--model", "openai:localhost:59999") == 2
    assert calls == [] and capsys.readouterr().err == \
        "krefine: error: openai:localhost:59999: the server URL needs a scheme, e.g. openai:http://localhost:59999\n"


@pytest.mark.parametrize("device, visible, gpus, error", [
    ("cuda", "3,5", "4", "krefine bench: --gpus 4: only 2 GPUs visible"),
    ("cpu", None, "2", "krefine bench: --gpus 2: judging on cpu uses no GPU (leave --gpus out)"),
    ("cpu", None, "0", "krefine bench: --gpus must be at least 1, got 0"),
])
def test_gpus_beyond_those_there_are_is_exit_2_before_any_run(suite, calls, tmp_path, capsys, monkeypatch,
                                                             device, visible, gpus, error):
    if visible is not None:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert bench_main(suite, "--out", tmp_path / "out", "--device", device, "--gpus", gpus) == 2
    assert calls == [] and capsys.readouterr().err == f"krefine: error: {error}\n"


# --- issue 19: the seed beside the best, results.md, --help, rerun after a kill

def test_bench_help_lists_its_flags(capsys):
    with pytest.raises(SystemExit) as e:
        bench_main("--help")
    out = capsys.readouterr().out
    assert e.value.code == 0 and all(f in out for f in ("--filter", "--out", "--model", "--sweep", "--set",
                                                         "--gpus", "--ray", "--list", "--device", "--config"))


@pytest.fixture
def seeded(monkeypatch):
    """Replace the loop: a seed at 1.2x eager and a sweep variant at 1.5x (interval ±10%,
    cuda_graph) for relu; a rejected seed for add; no seed for gelu."""
    from fixtures.runs.builder import Cand
    from tools.verdict import Diagnostic, Status
    seed_ok = Cand("r00-c00", None, Status.CORRECT, eager=1.2, compile=1.0, origin="inductor_seed")
    def fake_run_problem(problem_path, config, out_dir, *, model_spec=None, progress=True):
        name = Path(problem_path).stem
        if "relu" in name:
            build_run(Path(out_dir), [seed_ok, Cand("r01-c00", "r00-c00", Status.CORRECT, eager=1.5, compile=1.25,
                                                    origin="sweep", interval=0.1, measure="cuda_graph")])
        elif "add" in name:
            build_run(Path(out_dir), [Cand("r00-c00", None, Status.REJECTED, origin="inductor_seed", diagnostics=(
                Diagnostic("guard:library_call", "extern_kernels.mm in forward"),))], solved=False)
        else:
            build_run(Path(out_dir), [], seed_error="the Inductor output has no Triton kernel", solved=False)
        return {}
    monkeypatch.setattr("agent.loop.runner.run_problem", fake_run_problem)


def test_results_csv_puts_the_seed_beside_the_best_with_why(suite, seeded, tmp_path):
    bench_main(suite, "--out", tmp_path / "out", "--device", "cpu")
    rows = {r["problem"]: r for r in csv.DictReader((tmp_path / "out" / "results.csv").open())}
    assert {p: (r["seed"], r["seed_speedup_eager"], r["best_verdict"], r["speedup_eager"], r["eager_low"],
                r["measure"], r["why"]) for p, r in rows.items()} == {
        "1_relu": ("correct", "1.2", "correct", "1.5", "1.35", "cuda_graph", ""),
        "2_add": ("rejected", "", "—", "", "", "", "guard rejected the seed: guard:library_call: extern_kernels.mm in forward"),
        "10_gelu": ("no seed", "", "—", "", "", "", "no seed: the Inductor output has no Triton kernel")}


def test_results_md_has_the_table_row_with_interval_and_the_suite_figures(suite, seeded, tmp_path):
    bench_main(suite, "--out", tmp_path / "out", "--device", "cpu")
    md = (tmp_path / "out" / "results.md").read_text()
    assert "| 1_relu | correct | 1.20× | 1.00× | correct | 1.50× [1.35–1.65] | 1.25× [1.12–1.38] | cuda_graph | 1 | 0+1 |" in md
    assert "| correct | 1/3 (33%) | 1/3 (33%) |" in md and "seed coverage (correct pure-Triton seeds / all): 1/3" in md


def test_results_json_has_the_suite_figures_per_setting(suite, seeded, tmp_path):
    bench_main(suite, "--out", tmp_path / "out", "--device", "cpu")
    fig = json.loads((tmp_path / "out" / "results.json").read_text())["settings"][0]["figures"]
    assert (fig["seed"]["fast"]["eager"]["1.5"], fig["best"]["fast"]["eager"]["1"],
            fig["gain_over_seed"]["eager"]["value"]) == (0.0, pytest.approx(1 / 3), pytest.approx(1.25))


def test_a_run_the_evaluator_failed_on_is_resumed_by_the_next_bench(suite, calls, tmp_path, monkeypatch):
    resumed = []
    monkeypatch.setattr("agent.loop.runner.resume_run", lambda d, progress=True: resumed.append(Path(d)))
    build_run(tmp_path / "out" / "default" / "2_add", story()[:2], stop_reason="evaluator_error", solved=False)
    bench_main(suite, "--out", tmp_path / "out", "--device", "cpu")
    assert resumed == [tmp_path / "out" / "default" / "2_add"]


def _timed_out_seed(run_dir: Path, limit_s: int) -> None:   # --model none: no seed, nothing judged
    build_run(run_dir, [], stop_reason="no_model", solved=False,
              seed_error=f"portfolio: torch.compile took longer than {limit_s} s")


def test_a_seed_timeout_under_a_shorter_budget_is_run_again_under_the_longer_one(suite, calls, tmp_path):
    _timed_out_seed(tmp_path / "out" / "default" / "2_add", 240)
    bench_main(suite, "--out", tmp_path / "out", "--device", "cpu", "--filter", "add",
               "--set", "search.seed_timeout_s=300")
    assert [c["problem"] for c in calls] == ["2_add"]


def test_the_run_a_longer_seed_budget_replaces_is_kept_beside_the_bench(suite, calls, tmp_path, capsys):
    _timed_out_seed(tmp_path / "out" / "default" / "2_add", 240)
    bench_main(suite, "--out", tmp_path / "out", "--device", "cpu", "--filter", "add",
               "--set", "search.seed_timeout_s=300")
    kept = tmp_path / "out" / ".retried" / "default" / "2_add.seed-240s"
    assert "took longer than 240 s" in json.loads((kept / "summary.json").read_text())["seed"]["error"]
    assert f"2_add: its seed ran past 240 s; seeded again under 300 s (the earlier run is kept in {kept})" \
        in capsys.readouterr().out


def test_a_seed_timeout_under_the_same_budget_is_not_run_again(suite, calls, tmp_path):
    _timed_out_seed(tmp_path / "out" / "default" / "2_add", 300)
    bench_main(suite, "--out", tmp_path / "out", "--device", "cpu", "--filter", "add",
               "--set", "search.seed_timeout_s=300")
    assert calls == [] and not (tmp_path / "out" / ".retried").exists()


def test_a_seed_timeout_after_which_the_model_judged_candidates_is_not_run_again(suite, calls, tmp_path):
    build_run(tmp_path / "out" / "default" / "2_add", story()[:2], stop_reason="max_rounds", solved=False,
              seed_error="portfolio: torch.compile took longer than 240 s")
    bench_main(suite, "--out", tmp_path / "out", "--device", "cpu", "--filter", "add",
               "--set", "search.seed_timeout_s=300")
    assert calls == []


def test_a_seed_that_failed_for_another_reason_is_not_run_again(suite, calls, tmp_path):
    build_run(tmp_path / "out" / "default" / "2_add", [], stop_reason="no_model", solved=False,
              seed_error="the guards would reject it (side_stream: ...)")
    bench_main(suite, "--out", tmp_path / "out", "--device", "cpu", "--filter", "add",
               "--set", "search.seed_timeout_s=300")
    assert calls == []


def test_a_bench_killed_while_writing_results_reports_the_whole_suite_on_rerun(suite, calls, tmp_path):
    out = tmp_path / "out"
    bench_main(suite, "--out", out, "--device", "cpu", "--filter", "relu")
    # what a kill mid-write can leave: a temp file beside each result, and an older whole file
    for name in ("results.csv", "results.json", "results.md"):
        (out / f".{name}.x1y2z3").write_text('{"sett')
    assert bench_main(suite, "--out", out, "--device", "cpu") == 0
    doc = json.loads((out / "results.json").read_text())
    assert [r["problem"] for r in doc["settings"][0]["results"]] == ["1_relu", "2_add", "10_gelu"]


@pytest.mark.slow
def test_gpu_workers_do_not_outlive_a_bench_killed_with_minus_9(tmp_path):
    """A worker still loading its problem when the bench dies (kill -9: no handler runs)
    ends too, so no orphan judges into a run dir the next bench resumes."""
    import contextlib
    import signal
    import subprocess
    import sys
    import time
    from run_fixtures import REPO, cli_env
    suite = tmp_path / "suite"
    suite.mkdir()
    for i in range(2):
        (suite / f"{i}_p.py").write_text(f"import pathlib, time\nclass Model: pass\n"
                                         "def get_inputs(): return []\ndef get_init_inputs(): return []\n"
                                         f"pathlib.Path({str(tmp_path)!r}, 'loading{i}').touch()\ntime.sleep(120)\n")
    script = ("import sys; from pathlib import Path; from agent.bench import suite as bench\n"
              f"jobs = [bench.Job(bench.Setting('default', {{'run.device': 'cpu'}}), p, n, Path({str(tmp_path)!r}) / n)"
              f" for n, p in bench.find_problems(Path({str(suite)!r}), [])]\n"
              "bench.run_jobs(jobs, ['7', '9'], None, None, bench.Console(quiet=True))\n")
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, env=cli_env())
    def workers() -> set[int]:
        out = subprocess.run(["pgrep", "-P", str(proc.pid), "-f", "spawn_main"], capture_output=True, text=True).stdout
        return {int(p) for p in out.split()}   # (not multiprocessing's resource tracker)
    deadline = time.monotonic() + 120
    while len(list(tmp_path.glob("loading*"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)                 # until both are in their problem's import
    spawned = workers()
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    def alive() -> set[int]:
        found = set()
        for p in spawned:
            with contextlib.suppress(OSError):
                if "zombie" not in Path(f"/proc/{p}/status").read_text().lower():
                    found.add(p)
        return found
    deadline = time.monotonic() + 20
    while (left := alive()) and time.monotonic() < deadline:
        time.sleep(0.2)
    for p in left:                      # the test's own orphans, by pid
        os.kill(p, signal.SIGKILL)
    assert (len(spawned), left) == (2, set())


def test_report_only_reads_finished_runs_back_and_runs_nothing(suite, calls, tmp_path):
    bench_main(suite, "--out", tmp_path / "out", "--device", "cpu", "--filter", "relu")
    (tmp_path / "out" / "results.csv").unlink()
    calls.clear()
    assert bench_main(suite, "--out", tmp_path / "out", "--device", "cpu", "--report-only") == 0
    assert calls == []
    rows = {r["problem"]: r for r in csv.DictReader((tmp_path / "out" / "results.csv").open())}
    assert rows["1_relu"]["solved"] == "True" and "not run" in rows["2_add"]["error"]


def test_a_problem_not_run_has_no_seed_verdict_rather_than_no_seed(suite, calls, tmp_path):
    (tmp_path / "out").mkdir()
    bench_main(suite, "--out", tmp_path / "out", "--device", "cpu", "--report-only")
    rows = list(csv.DictReader((tmp_path / "out" / "results.csv").open()))
    assert {r["seed"] for r in rows} == {"—"}


def test_report_only_without_a_results_directory_is_exit_2_naming_it(suite, calls, tmp_path, capsys):
    assert bench_main(suite, "--out", tmp_path / "nowhere", "--report-only") == 2
    assert "nowhere" in capsys.readouterr().err and calls == []


def test_device_cuda_without_a_gpu_is_exit_2_before_any_run(suite, calls, tmp_path, capsys, monkeypatch):
    import agent.bench.workers as workers
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(workers, "gpu_count", lambda: 0)
    assert bench_main(suite, "--out", tmp_path / "out", "--device", "cuda") == 2
    assert calls == [] and capsys.readouterr().err == \
        "krefine: error: --device cuda but no CUDA device is visible (use --device cpu)\n"


def test_a_bench_with_model_none_makes_each_problems_inductor_seed_unless_told_otherwise():
    from agent.bench.suite import make_settings, parse_options
    (alone,) = make_settings(parse_options(["--model", "none"]))
    (told,) = make_settings(parse_options(["--model", "none", "--set", "search.seed_kernel=\"none\""]))
    assert alone.overrides["search.seed_kernel"] == "inductor" and alone.origins["search.seed_kernel"] == "--model none"
    assert told.overrides["search.seed_kernel"] == "none"
