"""[search] seed_kernel = "inductor": round 0 is torch.compile's kernels in KernelBook format.

Loop tests run the real graph with a scripted model and evaluator (tests/run_fixtures.py)
and a stand-in seed maker; the last test runs `krefine run` on cpu with a replay model,
where the seed is made for real (tools/dialect/kernelbook.py in its own process) and judged.
"""
from __future__ import annotations

import json

import pytest

from agent.bench.stats import fast_p, mean_pass_at_k, problem_result
from agent.config import load_config
from agent.loop.runstats import load_run
from run_fixtures import REPO, cli, fast_config, judged, loop_run, write_replay
from tools.errors import BadInput
from tools.jsonio import read_json, read_jsonl

SEEDED = {"search.seed_kernel": "inductor", "budget.candidates_per_round": 2}


def _seed(status: str, speedup: float | None = None):
    """A stand-in seed maker: a candidate the scripted evaluator judges `status`."""
    calls = []

    def make(problem, device):
        calls.append(device)
        return f"# judge: {status}{f' {speedup}' if speedup else ''}\nclass ModelNew: pass\n"
    make.calls = calls
    return make


def _generate_event(rd, iteration: int) -> dict:
    return next(e for e in rd.events() if e["node"] == "generate" and e["iteration"] == iteration)


def test_seed_is_round_zero_and_traced_as_not_model_written(tmp_path):
    state, rd, _, _ = loop_run(tmp_path, [judged("correct", 2.0)] * 2, make_seed=_seed("correct", 1.2), **SEEDED)
    seed = state["candidates"]["r00-c00"]
    assert (seed["round"], seed["origin"], seed["status"]) == (0, "inductor_seed", "correct")
    event = _generate_event(rd, 0)
    assert (event["candidate"], event["metrics"]["origin"]) == ("r00-c00", "inductor_seed")
    assert rd.candidate_src("r00-c00").exists() and rd.eval("r00-c00").exists()
    assert _generate_event(rd, 1)["metrics"]["origin"] == "model"


def test_round_one_refines_the_seed_as_its_parent(tmp_path):
    state, rd, backend, _ = loop_run(tmp_path, [judged("correct", 2.0)] * 2, make_seed=_seed("correct", 1.2), **SEEDED)
    assert "# judge: correct 1.2" in backend.prompts[0]   # the seed's source, the parent the prompt refines
    assert state["candidates"]["r01-c00"]["parent"] == "r00-c00"


def test_a_failed_seed_is_repaired_like_any_failed_candidate(tmp_path):
    state, _, backend, _ = loop_run(tmp_path, [judged("correct", 2.0)] * 2, make_seed=_seed("incorrect"), **SEEDED)
    assert state["candidates"]["r01-c00"]["parent"] == "r00-c00"


def test_seed_above_the_target_neither_stops_the_run_nor_becomes_its_best(tmp_path):
    state, rd, _, _ = loop_run(tmp_path, [judged("incorrect")] * 4, make_seed=_seed("correct", 3.0),
                               **SEEDED, **{"budget.max_rounds": 2})
    summary = rd.read_summary()
    assert (summary["stop_reason"], summary["solved"], summary["best"]) == ("max_rounds", False, None)
    assert {k: v for k, v in summary["seed"].items() if k != "seconds"} == \
        {"candidate": "r00-c00", "status": "correct", "speedup": {"eager": 3.0, "compile": 3.0}}
    assert not rd.best.exists()


def test_spent_candidates_and_rounds_count_the_model_only(tmp_path):
    _, rd, _, _ = loop_run(tmp_path, [judged("incorrect")] * 4, make_seed=_seed("correct", 3.0),
                           **SEEDED, **{"budget.max_rounds": 2})
    summary = rd.read_summary()
    assert (summary["candidates_evaluated"], summary["rounds"]) == (4, 2)


def test_fast_p_and_pass_at_k_count_model_candidates_only(tmp_path):
    _, rd, _, _ = loop_run(tmp_path, [judged("incorrect")] * 4, make_seed=_seed("correct", 3.0),
                           **SEEDED, **{"budget.max_rounds": 2})
    result = problem_result(load_run(rd.root))
    assert (result.correct, result.n_all, result.c_all, result.n_round1, result.c_round1) == (False, 4, 0, 2, 0)
    assert fast_p([result], 0.0) == 0.0
    assert mean_pass_at_k([(result.n_all, result.c_all)], 1) == (0.0, 1)


def test_a_seed_that_cannot_be_made_is_traced_and_round_one_starts_from_the_module(tmp_path):
    def fails(problem, device):
        raise ValueError("torch.compile failed: RuntimeError: no")
    state, rd, backend, _ = loop_run(tmp_path, [judged("correct", 2.0)] * 2, make_seed=fails, **SEEDED)
    event = _generate_event(rd, 0)
    assert (event["status"], event["candidate"], event["error"]) == \
        ("seed_failed", None, "no Inductor seed: torch.compile failed: RuntimeError: no")
    from agent.loop.prompting import render_initial
    from run_fixtures import TINY_PROBLEM
    assert "r00-c00" not in state["candidates"]
    assert backend.prompts[0] == render_initial(TINY_PROBLEM)


def test_a_seed_that_cannot_be_made_says_why_in_the_summary_and_the_no_best_line(tmp_path):
    from agent.loop.runstats import no_best_line

    def fails(problem, device):
        raise ValueError("default: the Inductor output has no Triton kernel")
    _, rd, _, _ = loop_run(tmp_path, [judged("incorrect")] * 2, make_seed=fails, **SEEDED)
    summary = rd.read_summary()
    assert {k: v for k, v in summary["seed"].items() if k != "seconds"} == {"candidate": None, "status": "seed_failed",
                               "error": "no Inductor seed: default: the Inductor output has no Triton kernel"}
    assert no_best_line(summary) == ("no correct candidate; no Inductor seed: default: the Inductor output "
                                     "has no Triton kernel")


def test_no_seed_is_made_by_default(tmp_path):
    make = _seed("correct", 3.0)
    state, rd, _, _ = loop_run(tmp_path, [judged("correct", 2.0)], make_seed=make)
    assert make.calls == [] and "r00-c00" not in state["candidates"]
    assert all(e["iteration"] != 0 for e in rd.events())


def test_a_seed_left_by_a_killed_session_is_reused_not_made_again(tmp_path):
    def left_seed(run):
        run.generated("r00-c00", parent=None, origin="inductor_seed", code="# judge: correct 1.2\nclass ModelNew: pass\n")
    make = _seed("incorrect")
    state, _, _, _ = loop_run(tmp_path, [judged("correct", 2.0)] * 2, make_seed=make, prepare=left_seed, **SEEDED)
    assert make.calls == [] and state["candidates"]["r00-c00"]["status"] == "correct"


def test_an_unknown_seed_kind_is_bad_input():
    with pytest.raises(BadInput, match="seed"):
        load_config(overrides={"search.seed_kernel": "compile"})


@pytest.mark.slow
def test_seeded_cpu_run_records_the_portable_seed_and_refines_it(tmp_path):
    """The real path: the seed made by torch.compile on cpu, judged, then round 1's prompt
    carries it as the parent."""
    replay = write_replay(tmp_path / "replay.jsonl", ["no code here"])
    config = fast_config(tmp_path, search={"seed_kernel": "inductor"})
    out = tmp_path / "run"
    done = cli("run", str(REPO / "tests" / "problems" / "relu.py"), "--config", str(config), "--model",
               f"replay:{replay}", "--device", "cpu", "--candidates", "1", "--max-iterations", "1",
               "--out", str(out), timeout=600)
    assert done.returncode == 1, done.stderr[-2000:]
    seed_src = (out / "candidates" / "r00-c00.py").read_text()
    assert "torch._inductor" not in seed_src and "class ModelNew(nn.Module):" in seed_src   # portable
    assert "import triton.language as tl" in seed_src and "@triton.jit" in seed_src
    events = list(read_jsonl(out / "trace.jsonl"))
    assert any(e["node"] == "generate" and e["candidate"] == "r00-c00" and e["metrics"]["origin"] == "inductor_seed"
               for e in events)
    assert seed_src in (out / "prompts" / "r01-c00.txt").read_text()
    assert read_json(out / "summary.json")["seed"]["candidate"] == "r00-c00"
    result = problem_result(load_run(out))
    assert (result.n_all, result.correct) == (1, False)
    print(json.dumps(read_json(out / "evals" / "r00-c00.json")["verdict"]))


def _portfolio(*entries):
    """A stand-in portfolio maker: (label, status, speedup) per configuration."""
    def make(problem, device):
        return [(label, f"# judge: {status}{f' {speedup}' if speedup else ''}\nclass ModelNew: pass\n# {label}\n")
                for label, status, speedup in entries]
    return make


def test_every_configuration_of_the_portfolio_is_a_round_zero_candidate_with_its_lineage(tmp_path):
    make = _portfolio(("default", "correct", 0.5), ("templates+tf32x3", "correct", 1.3), ("templates", "incorrect", None))
    state, rd, _, _ = loop_run(tmp_path, [judged("correct", 2.0)] * 2, make_seed=make, **SEEDED)
    zero = {c: r for c, r in state["candidates"].items() if r["round"] == 0}
    assert sorted(zero) == ["r00-c00", "r00-c01", "r00-c02"]
    assert [zero[c]["change"] for c in sorted(zero)] == ["Inductor default", "Inductor templates+tf32x3",
                                                         "Inductor templates"]
    assert {zero[c]["origin"] for c in zero} == {"inductor_seed"}


def test_the_fastest_correct_configuration_is_the_parent_round_one_refines(tmp_path):
    make = _portfolio(("default", "correct", 0.5), ("templates+tf32x3", "correct", 1.3))
    state, _, backend, _ = loop_run(tmp_path, [judged("correct", 2.0)] * 2, make_seed=make, **SEEDED)
    assert state["candidates"]["r01-c00"]["parent"] == "r00-c01"


def test_seed_portfolio_false_keeps_the_first_configuration_alone(tmp_path):
    make = _portfolio(("default", "correct", 0.5), ("templates+tf32x3", "correct", 1.3))
    state, _, _, _ = loop_run(tmp_path, [judged("correct", 2.0)] * 2, make_seed=make,
                              **{**SEEDED, "search.seed_portfolio": False})
    assert [c for c in state["candidates"] if c.startswith("r00-")] == ["r00-c00"]


TF32CONV = ("default+conv(igemm)", "correct", 0.5), ("default+conv(igemm)+tf32conv", "correct", 1.3)


def test_under_the_strict_precision_policy_the_tf32_convolution_entry_is_left_out(tmp_path):
    state, _, _, _ = loop_run(tmp_path, [judged("correct", 2.0)] * 2, make_seed=_portfolio(*TF32CONV),
                              **{**SEEDED, "eval.precision": "strict"})
    assert [state["candidates"][c]["change"] for c in sorted(state["candidates"]) if c.startswith("r00-")] == \
        ["Inductor default+conv(igemm)"]


def test_under_as_run_the_tf32_convolution_entry_is_judged(tmp_path):
    state, _, _, _ = loop_run(tmp_path, [judged("correct", 2.0)] * 2, make_seed=_portfolio(*TF32CONV), **SEEDED)
    assert [c for c in state["candidates"] if c.startswith("r00-")] == ["r00-c00", "r00-c01"]


def test_the_summary_says_what_the_seed_cost(tmp_path):
    import time
    slow = _seed("correct", 1.2)

    def made_in_a_while(problem, device):
        time.sleep(0.3)
        return slow(problem, device)
    _, rd, _, _ = loop_run(tmp_path, [judged("correct", 2.0)] * 2, make_seed=made_in_a_while, **SEEDED)
    assert 0.3 <= rd.read_summary()["seed"]["seconds"] < 30


def test_seed_portfolio_false_asks_for_the_seed_alone_not_the_portfolio(monkeypatch):
    import tools.dialect as dialect
    from agent.loop.graph import _inductor_seed
    called = []
    monkeypatch.setattr(dialect, "portfolio_in_subprocess", lambda *a, **k: called.append("portfolio") or [])
    monkeypatch.setattr(dialect, "seed_in_subprocess", lambda *a, **k: called.append("seed") or "SEED")
    problem = type("P", (), {"path": "p.py"})()
    assert _inductor_seed(5.0, "", "train", portfolio=False)(problem, "cpu") == [("seed", "SEED")]
    assert called == ["seed"]
