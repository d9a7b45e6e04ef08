"""The constant sweep in the loop, and `--model none` (seed + sweep, no model).

Loop tests run the real graph and Run (tests/run_fixtures.py) with a scripted
model and a stand-in judge that reads a candidate's launch constants: its speed follows
XBLOCK, and XBLOCK=128 is judged incorrect, so the sweep's hill-climb and its handling
of a broken variant can be checked exactly. The last tests run the real judge on CPU
(Triton's interpreter) and the real CLI.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from agent.config import load_config
from agent.loop.graph import LoopContext, build_graph, run_graph
from agent.models.llm import NoModelBackend
from agent.loop.progress import QuietProgress
from agent.loop.run import Run
from agent.loop.rundir import RunDir
from agent.search.sweep import sweep_variants
from run_fixtures import REPO, TINY_PROBLEM, Problem, ScriptedBackend, ScriptedJudges, cli, fast_config, cli_here
from tools.jsonio import read_json
from tools.verdict import Diagnostic, Status, Verdict

KERNEL = '''\
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, n, XBLOCK: tl.constexpr):
    pass


def call(x, n):
    k[(n,)](x, n, XBLOCK={xblock}, num_warps=4)
'''
SPEED = {256: 1.2, 512: 1.3, 1024: 1.4, 2048: 1.25}   # XBLOCK -> speedup; 128 is wrong


def completion(xblock: int = 256) -> str:
    return f"```python\n{KERNEL.format(xblock=xblock)}```"


class ConstantsJudge:
    """Judges by XBLOCK: correct at SPEED[XBLOCK] (num_warps 8 a little faster), incorrect at 128."""

    def __init__(self):
        self.calls: list[str] = []

    def __call__(self, problem, src: str, *, device, settings, candidate_name, profile, gpu_index) -> Verdict:
        self.calls.append(candidate_name.removesuffix(".py"))
        xblock = int(re.search(r"XBLOCK=(\d+)", src).group(1))
        if xblock not in SPEED:
            return Verdict(status=Status.INCORRECT, diagnostics=(Diagnostic(kind="mismatch", message="wrong tail"),),
                           feedback="wrong", checks={"phase_s": {"compile": 0.01, "test": 0.01}})
        speedup = None if device == "cpu" else SPEED[xblock] + (0.01 if "num_warps=8" in src else 0.0)
        interval = {b: {"ratio": speedup, "low": speedup, "high": speedup, "rounds": 5, "method": "rounds_log_t"}
                    for b in ("eager", "compile")} if speedup else {}
        return Verdict(status=Status.CORRECT, speedup_eager=speedup, speedup_compile=speedup,
                       speedup_interval=interval, feedback="ok",
                       checks={"phase_s": {"compile": 0.01, "test": 0.01, **({"time": 0.01} if speedup else {})}})


class Killed(BaseException):
    """Stands in for kill -9 part-way through a node."""


class KillAtNthSweepVariant(QuietProgress):
    def __init__(self, n: int):
        super().__init__()
        self.left = n

    def generated(self, record: dict) -> None:
        if record.get("origin") == "sweep":
            self.left -= 1
            if self.left == 0:
                raise Killed()


def run(tmp_path: Path, texts: list[str] | None, *, device: str = "cuda", judge=None, progress=None,
        make_seed=None, resume: bool = False, **overrides):
    """The real graph to its end (or to a Killed); texts None: `--model none`."""
    rd = RunDir(tmp_path / "run")
    runrec = Run(rd) if resume else Run.create(rd, {})
    problem_path = tmp_path / "tiny.py"
    problem_path.write_text(TINY_PROBLEM)
    config = load_config(None, {"search.sweep_variants": 6, "budget.target_speedup": 3.0, "budget.candidates_per_round": 1,
                                "budget.max_rounds": 1, **overrides})
    backend = NoModelBackend() if texts is None else ScriptedBackend(list(texts))
    judge = judge or ConstantsJudge()
    problem = Problem(problem_path, "tiny", TINY_PROBLEM)
    ctx = LoopContext(run=runrec, problem=problem, config=config, backend=backend, device=device,
                      progress=progress or QuietProgress(), make_seed=make_seed,
                      judges=ScriptedJudges(problem, device, config.eval, judge))
    state = run_graph(build_graph(), ctx, runrec.state(str(problem_path)))
    return runrec.view(state), rd, judge


def _sweep(state: dict) -> list[dict]:
    return [r for r in state["candidates"].values() if r["origin"] == "sweep"]


def test_the_best_correct_candidate_is_swept_into_candidates_of_its_round(tmp_path):
    state, rd, judge = run(tmp_path, [completion(256)], **{"search.sweep_budget": 6})
    variants = _sweep(state)
    assert [r["id"] for r in variants] == [f"r01-c0{i}" for i in range(1, 7)]
    assert {r["parent"] for r in variants} == {"r01-c00"}
    assert variants[0]["change"] == "k: XBLOCK 256->512"
    assert judge.calls == ["r01-c00", *(r["id"] for r in variants)]   # the same judge nodes judged them


def test_a_variant_changes_only_launch_constants_and_its_change_is_traced(tmp_path):
    state, rd, _ = run(tmp_path, [completion(256)], **{"search.sweep_budget": 6})
    events = {e["candidate"]: e for e in rd.events() if e["node"] == "generate"}
    for r in _sweep(state):
        assert events[r["id"]]["metrics"]["origin"] == "sweep"
        assert events[r["id"]]["metrics"]["change"] == r["change"]
        expected = {v.change: v.source for v in sweep_variants(KERNEL.format(xblock=256), 6)}
        assert rd.candidate_src(r["id"]).read_text() == expected[r["change"]]


def test_a_variant_the_judge_finds_incorrect_is_recorded_and_never_best(tmp_path):
    state, rd, _ = run(tmp_path, [completion(256)], **{"search.sweep_budget": 6})
    halved = next(r for r in _sweep(state) if r["change"] == "k: XBLOCK 256->128")
    assert (halved["status"], halved["correct"]) == ("incorrect", False)
    assert read_json(rd.eval(halved["id"]))["verdict"] == "incorrect"
    assert state["best"] != halved["id"]


def test_a_faster_variant_becomes_the_best_and_is_swept_in_turn(tmp_path):
    state, rd, _ = run(tmp_path, [completion(256)], **{"search.sweep_budget": 18})
    best = state["candidates"][state["best"]]
    assert "XBLOCK=1024, num_warps=8" in rd.best.read_text()
    assert best["origin"] == "sweep" and state["candidates"][best["parent"]]["origin"] == "sweep"
    assert rd.read_summary()["best"]["speedup"]["eager"] == pytest.approx(1.41)


def test_each_candidate_is_swept_at_most_once_and_no_source_twice(tmp_path):
    state, rd, _ = run(tmp_path, [completion(256)], **{"search.sweep_budget": 18})
    parents = [r["parent"] for r in _sweep(state)]
    assert len(state["swept"]) == len(set(state["swept"])) and set(parents) <= set(state["swept"])
    sources = [rd.candidate_src(cid).read_text() for cid in state["candidates"]]
    assert len(sources) == len(set(sources))


def test_the_sweep_budget_caps_variants_per_run_and_is_counted_apart(tmp_path):
    state, rd, _ = run(tmp_path, [completion(256)], **{"search.sweep_budget": 8})
    summary = rd.read_summary()
    assert len(_sweep(state)) == 8
    assert summary["budget_spent"]["sweep"] == 8 and summary["candidates_evaluated"] == 1


def test_sweep_variants_zero_means_no_sweep(tmp_path):
    state, _, judge = run(tmp_path, [completion(256)], **{"search.sweep_variants": 0})
    assert _sweep(state) == [] and judge.calls == ["r01-c00"]


def test_a_target_met_stops_the_run_before_any_sweep(tmp_path):
    state, _, _ = run(tmp_path, [completion(256)], **{"budget.target_speedup": 1.1})
    assert state["stop_reason"] == "target_reached" and _sweep(state) == []


def test_the_next_round_refines_the_swept_best(tmp_path):
    state, _, _ = run(tmp_path, [completion(256), completion(2048)],
                      **{"budget.max_rounds": 2, "search.sweep_budget": 6})
    best_after_round_1 = max((r for r in _sweep(state) if r["round"] == 1 and r["correct"]),
                             key=lambda r: r["speedup"]["eager"])
    assert state["candidates"]["r02-c00"]["parent"] == best_after_round_1["id"]


def test_a_kill_mid_sweep_then_resume_neither_duplicates_nor_rejudges(tmp_path):
    with pytest.raises(Killed):
        run(tmp_path, [completion(256)], progress=KillAtNthSweepVariant(3), **{"search.sweep_budget": 6})
    rd = RunDir(tmp_path / "run")
    assert len([e for e in rd.events() if e["node"] == "generate" and e["metrics"]["origin"] == "sweep"]) == 3
    state, rd, judge = run(tmp_path, [], resume=True, **{"search.sweep_budget": 6})
    generated = [e["candidate"] for e in rd.events() if e["node"] == "generate"]
    assert generated == ["r01-c00", *(f"r01-c0{i}" for i in range(1, 7))]
    assert judge.calls == [f"r01-c0{i}" for i in range(1, 7)]   # r01-c00 was judged before the kill
    assert len(_sweep(state)) == 6 and sorted(p.name for p in (rd.root / "candidates").iterdir()) == \
        [f"r01-c0{i}.py" for i in range(7)]


def test_on_cpu_a_run_with_a_model_does_not_sweep(tmp_path):
    state, _, _ = run(tmp_path, [completion(256)], device="cpu")
    assert state["stop_reason"] == "target_reached" and _sweep(state) == []


# ---------------------------------------------------------------- --model none

def _seed(xblock: int):
    def make(problem, device):
        return KERNEL.format(xblock=xblock)
    return make


def test_no_model_run_is_the_seed_and_its_sweeps(tmp_path):
    state, rd, judge = run(tmp_path, None, make_seed=_seed(256), **{"search.seed_kernel": "inductor"})
    summary = rd.read_summary()
    assert summary["stop_reason"] == "no_model" and summary["rounds"] == 0
    assert judge.calls[0] == "r00-c00" and all(r["round"] == 0 for r in state["candidates"].values())
    assert summary["budget_spent"]["sweep"] == len(_sweep(state)) > 0


def test_no_model_best_is_a_variant_never_the_seed(tmp_path):
    state, rd, _ = run(tmp_path, None, make_seed=_seed(256), **{"search.seed_kernel": "inductor"})
    summary = rd.read_summary()
    assert summary["best"]["candidate"] != "r00-c00"
    assert state["candidates"][summary["best"]["candidate"]]["origin"] == "sweep"
    assert summary["seed"]["candidate"] == "r00-c00"


def test_no_model_run_whose_variants_reach_the_target_is_solved(tmp_path):
    _, rd, _ = run(tmp_path, None, make_seed=_seed(256), **{"search.seed_kernel": "inductor", "budget.target_speedup": 1.25})
    summary = rd.read_summary()
    assert (summary["stop_reason"], summary["solved"]) == ("target_reached", True)


def test_no_model_run_without_a_seed_stops_with_no_model(tmp_path):
    def fails(problem, device):
        raise ValueError("no Triton kernel")
    state, rd, judge = run(tmp_path, None, make_seed=fails, **{"search.seed_kernel": "inductor"})
    assert rd.read_summary()["stop_reason"] == "no_model" and state["candidates"] == {} and judge.calls == []


def test_no_model_run_on_cpu_sweeps_its_seed_once_with_one_variant(tmp_path):
    # untimed: no variant can be told faster than another, and each costs minutes in the interpreter
    state, rd, _ = run(tmp_path, None, device="cpu", make_seed=_seed(256),
                       **{"search.seed_kernel": "inductor", "budget.target_speedup": 1.1})
    assert state["swept"] == ["r00-c00"] and len(_sweep(state)) == 1
    assert rd.read_summary()["stop_reason"] == "target_reached"   # untimed: a correct variant is enough


def test_run_with_model_none_and_the_seed_turned_off_is_one_line_exit_2(tmp_path):
    r = cli_here("run", str(REPO / "tests" / "problems" / "relu.py"), "--model", "none", "--seed-kernel", "none",
                 "--out", str(tmp_path / "run"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert 'seed_kernel = "inductor"' in r.stderr and not (tmp_path / "run").exists()


# ---------------------------------------------------------------- the real judge (cpu, interpreter)

def _kernelbook_relu() -> str:
    """A KernelBook-format candidate for tests/problems/relu.py (16 x 1000 fp32)."""
    return '''\
import torch
import triton
import triton.language as tl
from torch._inductor.runtime.triton_heuristics import grid
from torch._inductor.runtime import triton_helpers
import torch.nn as nn


@triton.jit
def triton_poi_fused_relu_0(in_ptr0, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    xnumel = 16000
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    xmask = xindex < xnumel
    x0 = xindex
    tmp0 = tl.load(in_ptr0 + (x0), xmask)
    tmp1 = tl.full([1], 0, tl.int32)
    tmp2 = triton_helpers.maximum(tmp1, tmp0)
    tl.store(out_ptr0 + (x0), tmp2, xmask)


def call(args):
    arg0_1, = args
    args.clear()
    buf0 = torch.empty_like(arg0_1)
    triton_poi_fused_relu_0[grid(16000)](arg0_1, buf0, 16000, XBLOCK=1024, num_warps=4, num_stages=1)
    return (buf0,)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, input_0):
        return call([input_0])[0]
'''


@pytest.mark.slow
def test_real_judge_on_cpu_judges_the_seeds_variants_correct(tmp_path):
    """--model none on cpu with the real judge (Triton's interpreter): the KernelBook-format
    seed is pre-screened with the one launch-constant variant that goes to the judge (nothing
    is timed on cpu, so no more are worth running), and it is judged correct."""
    from tools.judge import JudgePool
    from tools.problem import load_problem
    problem = load_problem(REPO / "tests" / "problems" / "relu.py")
    rd = RunDir(tmp_path / "run")
    runrec = Run.create(rd, {})
    config = load_config(fast_config(tmp_path), {"search.seed_kernel": "inductor"})
    judges = JudgePool(problem, device="cpu", gpu_count=1, settings=config.eval)
    ctx = LoopContext(run=runrec, problem=problem, config=config, backend=NoModelBackend(), device="cpu",
                      progress=QuietProgress(), judges=judges, make_seed=lambda p, d: _kernelbook_relu())
    try:
        state = runrec.view(run_graph(build_graph(), ctx, runrec.state(str(problem.path))))
    finally:
        judges.close()
    verdicts = {cid: read_json(rd.eval(cid))["verdict"] for cid in state["candidates"]}
    assert verdicts == {"r00-c00": "correct", "r00-c01": "correct"}, verdicts
    screened = read_json(rd.root / "prescreen" / "r00-c00.json")
    assert len(screened["variants"]) == 1 and screened["variants"][0]["status"] == "correct"
    assert rd.read_summary()["best"]["candidate"] == "r00-c01"
    assert "XBLOCK=2048" in rd.best.read_text()


@pytest.mark.slow
def test_bench_with_model_none_runs_seed_and_sweep(tmp_path):
    """`krefine bench SUITE --model none --set search.seed_kernel=inductor` on cpu: the seed is made
    by torch.compile, swept, and the run stops with "no_model" or solved by a variant."""
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "relu.py").write_text((REPO / "tests" / "problems" / "relu.py").read_text())
    out = tmp_path / "bench"
    r = cli("bench", str(suite), "--model", "none", "--set", "search.seed_kernel=inductor", "--device", "cpu",
            "--config", str(fast_config(tmp_path)), "--out", str(out), timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    run_dir = next(out.glob("*/relu"))
    summary = read_json(run_dir / "summary.json")
    assert summary["stop_reason"] == "target_reached" and summary["budget_spent"]["sweep"] == 1
    assert read_json(run_dir / "run.json")["model"] == "none"


def test_model_none_loads_nothing_and_takes_no_model_actor():
    from agent.bench import ray_bench
    from agent.models.llm import make_backend, server_url
    config = load_config(None, {"model.id": "openai:http://localhost:8000"})
    assert isinstance(make_backend("none", config), NoModelBackend) and server_url("none") is None
    assert ray_bench.make_plan({"CPU": 2}, load_config(None, {"run.device": "cpu", "model.id": "none"})).model_actors == 0


def test_inspect_labels_a_sweep_variant_with_what_it_changed(tmp_path):
    from agent.cli.inspect import origin_label
    from agent.loop.runstats import load_run
    _, rd, _ = run(tmp_path, None, make_seed=_seed(256), **{"search.seed_kernel": "inductor"})
    loaded = load_run(rd.root)
    assert origin_label(loaded, loaded.candidates["r00-c00"]) == "Inductor seed"
    assert origin_label(loaded, loaded.candidates["r00-c01"]) == "sweep: k: XBLOCK 256->512"


def test_run_seed_kernel_flag_sets_the_search_seed_kernel():
    from agent.cli import RUN_FLAGS, build_parser, flag_overrides
    args = build_parser().parse_args(["run", "p.py", "--model", "none", "--seed-kernel", "inductor"])
    assert load_config(None, *flag_overrides(args, RUN_FLAGS)).search.seed_kernel == "inductor"


def test_the_model_refines_the_swept_best_and_its_prompt_names_how_it_was_found(tmp_path):
    state, rd, _ = run(tmp_path, [completion(256), completion(512)], **{"search.sweep_budget": 6,
                                                                        "budget.max_rounds": 2})
    best = max((r for r in state["candidates"].values() if r["round"] == 1 and r["status"] == "correct"),
               key=lambda r: r["speedup"]["eager"] or 0)
    assert best["origin"] == "sweep" and state["candidates"]["r02-c00"]["parent"] == best["id"]
    prompt = rd.prompt("r02-c00").read_text()
    xblock, warps = re.search(r"XBLOCK=(\d+), num_warps=(\d+)", rd.source(best["id"])).groups()
    assert f"found by: k: XBLOCK 256->{xblock}" in prompt
    assert f"launch k: XBLOCK={xblock}, num_warps={warps}" in prompt
