"""`krefine bench --ray`: a replayed suite (tests/fixtures/ray_suite) on a local Ray cluster
against the single-host run of the same replay; a judge actor killed (kill -9) mid-candidate;
a candidate under which two judges die; a driver killed and restarted with the same --out.

The cluster is one per module, started here with two judge slots declared as the custom
resource krefine_gpu (no GPU: Triton's interpreter judges) and two more for the tests of
the judge fleet on its own; an in-process bench joins it through this process's
connection, a subprocess driver through its address. Figures that
differ between any two runs (tokens, which count the numbers in feedback text, wall
time and the judge's wall per candidate) are not compared; the suite table and every
score are.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from agent.bench import ray_bench
from agent.cli import main
from agent.config import load_config
from agent.loop.rundir import RunDir
from llm_fixtures import tiny_llama_dir  # noqa: F401  (pytest fixture)
from run_fixtures import REPO, cli, cli_env
from tools.errors import BadInput

SUITE = REPO / "tests" / "fixtures" / "ray_suite"
PROBLEMS, CONFIG = SUITE / "problems", SUITE / "bench.toml"
REPLAY = f"replay:{SUITE / 'replays'}/{{problem}}.jsonl"
SLOW = ("3_slow_affine", "r01-c00")           # seconds in the interpreter: time to kill its judge
ON_RAY = ["--ray", "auto", "--set", "bench.judge_resource=krefine_gpu", "--set", "bench.progress_interval_s=5"]


def bench_args(out: Path, *extra: str) -> list[str]:
    return ["bench", str(PROBLEMS), "--config", str(CONFIG), "--device", "cpu", "--model", REPLAY,
            "--out", str(out), *extra]


def table(out: Path) -> tuple[list[dict], dict]:
    """results.json's rows and scores, less what differs between any two runs."""
    setting = json.loads((out / "results.json").read_text())["settings"][0]
    rows = [{k: v for k, v in r.items() if k not in ("run_dir", "tokens", "wall_s", "judge_s")} for r in setting["results"]]
    return rows, setting["scores"]


def events(out: Path, problem: str) -> list[dict]:
    return [json.loads(line) for line in (out / "default" / problem / "trace.jsonl").read_text().splitlines()]


@pytest.fixture(autouse=True)
def _the_clusters_home(monkeypatch):
    """The module's Ray cluster keeps its auth token under the HOME it started with (the
    run's, tests/conftest.py): a driver started by a test must find it there."""
    monkeypatch.setenv("HOME", os.environ["KREFINE_TEST_RUN_HOME"])


@pytest.fixture(scope="module")
def cluster():
    ray = pytest.importorskip("ray")
    # krefine_gpu for the benches' judges, krefine_fleet for the fleet tests' own, which stay up all module long
    ray.init(address="local", num_cpus=2, resources={"krefine_gpu": 2, "krefine_fleet": 2}, include_dashboard=False,
             logging_level="ERROR", log_to_driver=False)
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


@pytest.fixture(scope="module")
def single_host(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("single") / "out"
    assert main(bench_args(out)) == 0
    return out


def judge_running(ray, wanted: str, exclude: set[int] = frozenset(), timeout_s: float = 120) -> int:
    """The pid of a judge actor now judging `wanted` ("problem/candidate.py")."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for name in ray.util.list_named_actors():
            if not name.startswith("krefine-judge-"):
                continue
            try:
                info = ray.get(ray.get_actor(name).info.remote(), timeout=5)
            except Exception:   # starting, restarting or gone: look again
                continue
            if wanted in info["judging"] and info["pid"] not in exclude:
                return info["pid"]
        time.sleep(0.05)
    raise AssertionError(f"no judge took {wanted} within {timeout_s} s")


@pytest.fixture(scope="module")
def killed_run(cluster, tmp_path_factory) -> tuple[Path, int]:
    """The suite on Ray, with the judge of the slow candidate killed under it."""
    import ray
    out = tmp_path_factory.mktemp("ray") / "out"
    result = {}
    bench = threading.Thread(target=lambda: result.update(rc=main(bench_args(out, *ON_RAY))))
    bench.start()
    pid = judge_running(ray, f"{SLOW[0]}/{SLOW[1]}.py")
    os.kill(pid, signal.SIGKILL)
    bench.join(timeout=300)
    assert result == {"rc": 0}
    return out, pid


# ---------------------------------------------------------------- the suite on Ray

@pytest.mark.slow
def test_a_judge_killed_mid_suite_leaves_the_single_host_table_and_scores(killed_run, single_host):
    assert table(killed_run[0]) == table(single_host)


def test_the_killed_judges_death_is_traced_and_its_candidate_requeued(killed_run):
    out, pid = killed_run
    died = [e for e in events(out, SLOW[0]) if e["node"] == "evaluate" and e["candidate"] == SLOW[1]]
    assert [(e["status"], e["metrics"]["pid"], e["metrics"]["requeued"]) for e in died] == [("judge_died", pid, True)]


def test_the_killed_judges_candidate_gets_one_verdict_and_one_set_of_phase_events(killed_run, single_host):
    out, _ = killed_run
    phases = [e["node"] for e in events(out, SLOW[0]) if e["candidate"] == SLOW[1] and e["node"] in ("compile", "test")]
    verdict = json.loads((out / "default" / SLOW[0] / "evals" / f"{SLOW[1]}.json").read_text())
    assert (phases, verdict["verdict"]) == (["compile", "test"], "correct")


# ---------------------------------------------------------------- the fleet on its own

@pytest.fixture(scope="module")
def fleet(cluster):
    from agent.bench.ray_judges import JudgeFleet
    fleet = JudgeFleet.start(2, device="cpu", resource="krefine_fleet", cache=2, slots=2)
    fleet.wait_ready(120)
    yield fleet
    fleet.close()


def pool_for(fleet, problem: Path, rd_root: Path):
    from agent.bench.ray_judges import RayJudgePool
    from agent.loop.run import Run
    from agent.loop.rundir import RunDir
    from tools.problem import load_problem
    return RayJudgePool(fleet, load_problem(problem), load_config(CONFIG).eval, Run.create(RunDir(rd_root), {}))


@pytest.mark.slow
def test_a_candidate_under_which_two_judges_die_is_a_runtime_error(fleet, tmp_path):
    import ray
    pool = pool_for(fleet, PROBLEMS / f"{SLOW[0]}.py", tmp_path / "run")
    src = json.loads((SUITE / "replays" / f"{SLOW[0]}.jsonl").read_text().splitlines()[0])["completion"]
    src = src.split("```python\n")[1].split("```")[0]
    got = {}
    worker = threading.Thread(target=lambda: got.update(v=pool.judge(src, candidate_name=f"{SLOW[1]}.py")))
    worker.start()
    first = judge_running(ray, f"{SLOW[0]}/{SLOW[1]}.py")
    os.kill(first, signal.SIGKILL)
    os.kill(judge_running(ray, f"{SLOW[0]}/{SLOW[1]}.py", exclude={first}), signal.SIGKILL)
    worker.join(timeout=120)
    verdict = got["v"]
    died = [e["metrics"]["requeued"] for e in pool.run.events() if e["node"] == "evaluate"]
    assert (verdict.status.value, verdict.diagnostics[0].kind, died) == ("runtime_error", "judge_died", [True, False])


def test_a_problems_own_fault_on_a_judge_reaches_the_driver_as_bad_input(fleet, tmp_path):
    problem = tmp_path / "raises.py"
    problem.write_text((PROBLEMS / "1_relu.py").read_text().replace(
        "        return torch.relu(x)", "        if x.device.type != 'meta':\n            raise ValueError('boom')\n"
                                       "        return torch.relu(x)"))
    src = json.loads((SUITE / "replays" / "1_relu.jsonl").read_text().splitlines()[0])["completion"]
    with pytest.raises(BadInput, match="boom"):
        pool_for(fleet, problem, tmp_path / "run").judge(src.split("```python\n")[1].split("```")[0],
                                                         candidate_name="r01-c00.py")


# ---------------------------------------------------------------- a driver killed and restarted

@pytest.mark.slow
def test_a_driver_restarted_with_the_same_out_loses_nothing_and_judges_nothing_twice(cluster, tmp_path, single_host):
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "agent.cli", *bench_args(out, "--filter", "2_affine", "--ray", cluster, "--set",
                                                          "bench.judge_resource=krefine_gpu")]
    env = {**cli_env(), "COLUMNS": "200"}
    first = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    evals = lambda: {p: p.read_bytes() for p in out.glob("default/*/evals/*.json")}   # noqa: E731
    deadline = time.monotonic() + 240
    while not evals() and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    first.kill()                                  # kill -9 of the driver, candidates in flight
    first.wait()
    before = evals()
    second = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr
    after = evals()
    judged = int(second.stdout.split("ray: ")[-1].split(" candidates judged")[0])
    assert 0 < len(before) < len(after)
    assert {p: after[p] for p in before} == before            # nothing finished was redone
    assert judged == len(after) - len(before)                 # ... and only the rest was judged
    assert table(out)[0] == [r for r in table(single_host)[0] if r["problem"] == "2_affine"]


# ---------------------------------------------------------------- bad input

def test_ray_missing_is_one_line_and_exit_2(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None if name == "ray" else object())
    assert main(bench_args(tmp_path / "out", "--ray")) == 2
    err = capsys.readouterr().err
    assert err == "krefine: error: krefine bench: --ray needs Ray, which is not installed: pip install -e '.[ray]'\n"


def test_a_malformed_address_is_one_line_and_exit_2(tmp_path, capsys):
    assert main(bench_args(tmp_path / "out", "--ray", "http://head")) == 2
    assert capsys.readouterr().err == ("krefine: error: --ray 'http://head': expected auto, local, "
                                       "HOST:PORT or ray://HOST:PORT\n")


def test_an_address_where_no_cluster_answers_is_one_line_and_exit_2(tmp_path):
    pytest.importorskip("ray")
    r = cli(*bench_args(tmp_path / "out", "--ray", "127.0.0.1:9"))   # a process not connected to the module's cluster
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert r.stderr.startswith("krefine: error: krefine bench: no Ray cluster answers at '127.0.0.1:9'")


def test_auto_standing_for_a_cluster_that_is_gone_is_one_line_and_exit_2(tmp_path):
    pytest.importorskip("ray")
    r = subprocess.run([sys.executable, "-m", "agent.cli", *bench_args(tmp_path / "out", "--ray")], cwd=REPO,
                       env={**cli_env(), "RAY_ADDRESS": "127.0.0.1:9"}, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "no Ray cluster answers at 'auto' (" in r.stderr and ":9, from RAY_ADDRESS" in r.stderr


def test_gpus_with_ray_is_one_line_and_exit_2(tmp_path, capsys):
    assert main(bench_args(tmp_path / "out", "--ray", "--gpus", "2")) == 2
    assert "--gpus counts this host's GPUs; on a Ray cluster set --set bench.judges=N" in capsys.readouterr().err


def test_an_address_other_than_the_connected_clusters_is_refused(cluster, tmp_path, capsys):
    assert main(bench_args(tmp_path / "out", "--ray", "127.0.0.1:9")) == 2
    assert f"connected to the Ray cluster at {cluster!r}, not '127.0.0.1:9'" in capsys.readouterr().err


def test_a_ray_address_in_agent_toml_that_does_not_parse_names_the_key(tmp_path, capsys):
    config = tmp_path / "agent.toml"
    config.write_text('[bench]\nray_address = "head"\n')
    assert main(["bench", str(PROBLEMS), "--config", str(config), "--out", str(tmp_path / "out")]) == 2
    assert "[bench]: ray_address 'head': expected auto, local, HOST:PORT or ray://HOST:PORT" in capsys.readouterr().err


# ---------------------------------------------------------------- the plan

def plan(resources: dict, model: str = "replay:x.jsonl", **overrides):
    return ray_bench.make_plan(resources, load_config(None, {"model.id": model, **overrides}))


def test_a_gpu_cluster_gets_one_judge_per_gpu_on_cuda():
    assert plan({"GPU": 4, "CPU": 64}) == ray_bench.Plan("cuda", "GPU", 4, 0, "GPU")


def test_a_transformers_model_takes_its_gpus_from_the_judges():
    assert plan({"GPU": 4}, model="facebook/KernelLLM", **{"bench.model_gpus": 2}) == \
        ray_bench.Plan("cuda", "GPU", 2, 2, "GPU")


def test_a_cluster_without_gpus_judges_on_cpu_one_judge_per_cpu():
    assert plan({"CPU": 8}) == ray_bench.Plan("cpu", "CPU", 8, 0, "CPU")


def test_a_custom_judge_resource_is_refused_on_cuda():
    with pytest.raises(BadInput, match="judge_resource = 'krefine_gpu' with device cuda"):
        plan({"GPU": 2, "krefine_gpu": 2}, **{"bench.judge_resource": "krefine_gpu"})


def test_a_cluster_without_the_judges_resource_is_bad_input_naming_it():
    with pytest.raises(BadInput, match="the Ray cluster has 0 krefine_gpu: no judge can start"):
        plan({"CPU": 8}, **{"bench.judge_resource": "krefine_gpu", "run.device": "cpu"})


def test_more_judges_than_the_cluster_has_wait_for_it_to_grow():
    assert plan({"GPU": 2}, **{"bench.judges": 3}).waiting == 1


# ---------------------------------------------------------------- the judge actor's sessions

def test_a_judge_actor_keeps_judge_cache_problems_and_closes_the_oldest(tmp_path):
    """JudgeActor in this process (what the actor runs); syntax errors never reach a worker."""
    from agent.bench.judge_actor import JudgeActor, ProblemRef
    from tools.problem import load_problem
    service = JudgeActor("cpu", cache_size=1)
    settings = load_config(CONFIG).eval
    refs = [ProblemRef.of(load_problem(p)) for p in sorted(PROBLEMS.glob("*.py"))[:2]]
    try:
        for ref in refs:
            verdict = service.judge(ref, settings, "def broken(:\n", "r01-c00.py", False)
            assert verdict.status.value == "compile_error"
        assert service.problems() == [refs[1].key]
    finally:
        service._cache.close()   # its spare fork servers (an actor's die with its process)


def test_a_gpu_judge_actor_starts_its_first_judges_fork_servers_when_it_starts(monkeypatch):
    """Before any problem: the first judge finds its servers importing, as the later ones do."""
    from agent.bench.judge_actor import JudgeActor
    from tools.sandbox import isolation
    started = []
    monkeypatch.setattr(isolation, "_new_forkserver", lambda kind, gpu: started.append((kind, gpu)) or None)
    actor = JudgeActor("cuda", cache_size=1)
    try:
        assert started == [("cuda", 0), ("compile", 0)]
    finally:
        actor._cache.close()


# ---------------------------------------------------------------- the model on its own actor

def test_a_transformers_model_generates_on_a_model_actor_never_in_the_driver(cluster, tmp_path, tiny_llama_dir,
                                                                           monkeypatch, capsys):
    def no_load_here(self):
        raise AssertionError("the driver loaded the model")
    # this process only, not the actor's
    monkeypatch.setattr("agent.models.transformers_backend.TransformersBackend.load", no_load_here)
    out = tmp_path / "out"
    args = ["bench", str(PROBLEMS), "--config", str(CONFIG), "--device", "cpu", "--model", str(tiny_llama_dir),
            "--filter", "relu|2_affine", "--out", str(out), "--set", "budget.max_rounds=1",
            "--set", "budget.candidates_per_round=1", "--set", "sampling.max_new_tokens=16", *ON_RAY]
    assert main(args) == 0
    models = [RunDir(out / "default" / p).completions()[0]["model"] for p in ("1_relu", "2_affine")]
    assert models == [str(tiny_llama_dir)] * 2
    assert "ray: 2 judge actor(s) on krefine_gpu (cpu), 1 model actor(s)" in capsys.readouterr().out


# ---------------------------------------------------------------- what the job's working_dir ships

def packaged(root: Path, out: Path) -> set[str]:
    """The files Ray's own packaging puts in the working_dir zip, with the bench's excludes."""
    import zipfile
    from ray._private.runtime_env.packaging import _zip_files
    zipped = root.parent / "wd.zip"
    _zip_files(str(root), ray_bench.working_dir_excludes(root, out), str(zipped), include_gitignore=True)
    with zipfile.ZipFile(zipped) as z:
        return {n for n in z.namelist() if not n.endswith("/")}


@pytest.fixture
def checkout(tmp_path) -> Path:
    root = tmp_path / "checkout"
    for rel in ("agent/x.py", "tools/y.py", "big/blob.bin", "secret/weights.bin", ".venv/lib/torch.so",
                "odd[1]/f.bin", "runs/r/run.json", "results/out.json"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x")
    (root / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (root / ".gitignore").write_text("/big/\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / ".git" / "info" / "exclude").write_text("/secret/\n/odd[[]1]/\n")
    return root


def test_the_working_dir_ships_the_code(checkout):
    assert {"agent/x.py", "tools/y.py"} <= packaged(checkout, checkout / "results")


@pytest.mark.parametrize("left_out", ["big/blob.bin", "secret/weights.bin", "odd[1]/f.bin", "runs/r/run.json",
                                      "results/out.json"])
def test_the_working_dir_leaves_out_what_git_ignores_and_the_results(checkout, left_out):
    assert left_out not in packaged(checkout, checkout / "results")


def test_a_virtual_environment_in_the_checkout_is_left_out_without_git(checkout):
    import shutil
    shutil.rmtree(checkout / ".git")
    assert not any(n.startswith(".venv/") for n in packaged(checkout, checkout / "results"))
