"""agent/bench/kb_harness.py and kb_compare.py: KernelBench's verdicts beside krefine's.

The comparison (agreement, the speedup ratio, the explanation rules) on made-up records, what
a rerun skips, and bad input (one line, exit 2). KernelBench's own evaluation needs a GPU:
`benchmarks/kernelbench.sh harness` runs it.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

from agent.bench import kb_compare as cmp
from agent.bench import kb_features
from agent.bench import kb_harness as h

CONV_REF = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)

    def forward(self, x):
        return self.conv(x)

def get_inputs():
    return [torch.randn(2, 3, 16, 16)]

def get_init_inputs():
    return []
'''

DROPOUT_REF = CONV_REF.replace("nn.Conv2d(3, 8, 3)", "nn.Dropout(0.2)")


def rec(problem="1_x", kind="seed", *, kr_correct=True, kr_speedup=1.0, kr_verdict=None, reason="",
        diagnostics=(), patterns=(), kb_correct=True, kb_compiled=True, kb_speedup=1.0, error=None,
        error_name=None, max_difference=(), strict=None, features=(), status="ok"):
    return {"problem": problem, "kind": kind, "features": list(features),
            "krefine": {"verdict": kr_verdict or ("correct" if kr_correct else "incorrect"), "correct": kr_correct,
                        "speedup_eager": kr_speedup if kr_correct else None, "reason": reason,
                        "diagnostics": list(diagnostics), "patterns": list(patterns)},
            "kb": {"status": status, "compiled": kb_compiled, "correctness": kb_correct,
                   "speedup": kb_speedup if kb_correct else None, "runtime_ms": 1.0, "ref_ms": kb_speedup,
                   "error": error, "error_name": error_name, "max_difference": list(max_difference),
                   "strict_fp32": strict}}


MISMATCH = "Output mismatch (max difference 0.0011)"


# ---------------------------------------------------------------- features

def test_a_conv_reference_is_marked_conv():
    assert kb_features.features(CONV_REF) == ["conv"]


def test_a_convolution_in_a_submodule_class_marks_the_reference_conv():
    src = ("class PatchEmbed(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
           "        self.proj = nn.Conv2d(3, 96, 4, 4)\n\n"
           "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
           "        self.embed = PatchEmbed()\n\n    def forward(self, x):\n        return self.embed(x)\n")
    assert "conv" in kb_features.features(src)


def test_dropout_in_the_model_is_marked_stochastic():
    assert "stochastic" in kb_features.features(DROPOUT_REF)


def test_random_inputs_in_get_inputs_do_not_make_a_reference_stochastic():
    assert "stochastic" not in kb_features.features(CONV_REF)


@pytest.mark.parametrize("call", ["nn.Dropout(0.0)", "nn.Dropout(p=0)", "nn.Dropout2d(p=0.0, inplace=True)"])
def test_a_dropout_whose_rate_is_a_literal_zero_is_not_stochastic(call):
    assert "stochastic" not in kb_features.features(CONV_REF.replace("nn.Conv2d(3, 8, 3)", call))


@pytest.mark.parametrize("call", ["nn.Dropout()", "nn.Dropout(rate)", "nn.Dropout(p=0.1)"])
def test_a_dropout_with_a_default_variable_or_nonzero_rate_is_stochastic(call):
    assert "stochastic" in kb_features.features(CONV_REF.replace("nn.Conv2d(3, 8, 3)", call))


@pytest.mark.parametrize("expr, random", [("F.dropout(x, 0.0)", False), ("F.dropout(x, 0.5, training=False)", False),
                                          ("F.dropout(x, p=0.3)", True), ("F.dropout(x)", True)])
def test_a_functional_dropout_draws_unless_its_rate_is_zero_or_training_is_false(expr, random):
    src = CONV_REF.replace("return self.conv(x)", f"return {expr}")
    assert ("stochastic" in kb_features.features(src)) is random


def test_a_random_draw_in_forward_is_marked_stochastic():
    src = CONV_REF.replace("return self.conv(x)", "return self.conv(x) * torch.rand_like(x).bernoulli_(0.5)")
    assert "stochastic" in kb_features.features(src)


# ---------------------------------------------------------------- explanations

def test_records_that_agree_get_no_explanation():
    assert cmp.explain(rec(kr_correct=False, kb_correct=False, kb_speedup=None)) == ""


def test_a_conv_mismatch_that_passes_with_tf32_off_is_explained_by_tf32():
    r = rec(kb_correct=False, error=MISMATCH, max_difference=[0.0011], strict={"correctness": True},
            features=["conv"])
    assert cmp.explain(r).startswith(cmp.TF32_CONV)


def test_a_small_conv_mismatch_without_recheck_is_explained_by_tf32():
    r = rec(kb_correct=False, error=MISMATCH, max_difference=[0.0011], features=["conv"])
    assert cmp.explain(r).startswith(cmp.TF32_CONV)


def test_a_conv_mismatch_that_fails_with_tf32_off_too_is_unexplained():
    r = rec(kb_correct=False, error=MISMATCH, max_difference=[0.0011], strict={"correctness": False},
            features=["conv"])
    assert cmp.explain(r) == cmp.UNEXPLAINED


def test_a_stochastic_feature_gives_way_to_a_strict_recheck_that_passes():
    r = rec(kb_correct=False, error=MISMATCH, max_difference=[0.0011], strict={"correctness": True},
            features=["conv", "stochastic"])
    assert cmp.explain(r).startswith(cmp.TF32_CONV)


def test_a_reference_further_from_its_strict_run_than_the_kernel_explains_a_strict_failure():
    r = rec(kb_correct=False, error=MISMATCH, max_difference=[0.19, 0.21],
            strict={"correctness": False, "max_difference": [0.00035, 0.00033]}, features=["conv"])
    why = cmp.explain(r)
    assert why.startswith("KernelBench's fp32 tolerance is tighter than its own reference's error") and \
        "at least 0.21" in why and "the kernel 0.00035" in why


def test_a_strict_failure_as_large_as_the_default_flags_one_stays_unexplained():
    r = rec(kb_correct=False, error=MISMATCH, max_difference=[0.0011, 0.0012],
            strict={"correctness": False, "max_difference": [0.0010, 0.0012]}, features=["conv"])
    assert cmp.explain(r) == cmp.UNEXPLAINED


def _tf32_pair(kernel_strict, ref_err, peer_problem="1_x"):
    """A `+tf32conv` entry failing KernelBench both ways, and its problem's exact-fp32 seed."""
    tf32 = rec(kind="portfolio", kb_correct=False, error=MISMATCH, max_difference=[0.0004, 0.0004],
               strict={"correctness": False, "max_difference": kernel_strict}, features=["conv"])
    seed = rec(problem=peer_problem, kb_correct=False, error=MISMATCH, max_difference=ref_err,
               strict={"correctness": True, "max_difference": []}, features=["conv"])
    return tf32, seed


def test_a_tf32_kernel_as_far_from_exact_as_kernelbenchs_own_reference_is_explained_by_its_exact_peer():
    tf32, seed = _tf32_pair([0.00068, 0.0022], [0.00067, 0.0021])
    why = cmp.explain(tf32, [seed, tf32])
    assert why.startswith("the kernel convolves in TF32") and "0.0022 off KernelBench's strict-fp32" in why


def test_a_tf32_kernel_further_from_exact_than_the_margin_stays_unexplained():
    tf32, seed = _tf32_pair([0.00068, 0.0032], [0.00067, 0.0021])
    assert cmp.explain(tf32, [seed]) == cmp.UNEXPLAINED


def test_another_problems_exact_entry_is_no_evidence_for_a_tf32_kernel():
    tf32, seed = _tf32_pair([0.00068, 0.0022], [0.00067, 0.0021], peer_problem="2_y")
    assert cmp.explain(tf32, [seed]) == cmp.UNEXPLAINED


def test_the_tf32_margin_is_the_judges_as_run_margin():
    from tools.judge.accuracy import EAGER_ERROR_MARGIN
    assert cmp.TF32_MARGIN == EAGER_ERROR_MARGIN


def test_a_kinds_summary_reads_peers_of_the_other_kinds():
    tf32, seed = _tf32_pair([0.00068, 0.0022], [0.00067, 0.0021])
    assert cmp.summary([tf32], [seed, tf32])["unexplained"] == 0 and cmp.summary([tf32])["unexplained"] == 1


def _ill(ref_err, kernel_err, ref_passes):
    r = rec(kb_correct=False, error="Output mismatch (max difference 3.5e14)", max_difference=[3.5e14, 3.9e14],
            strict={"correctness": False, "max_difference": [3.5e14, 3.9e14]})
    r["kb"]["float64"] = {"ref_err": ref_err, "kernel_err": kernel_err, "ref_passes": ref_passes, "error": None}
    return r


def test_a_reference_that_fails_kernelbenchs_tolerance_against_its_float64_forward_explains_a_kernel_as_close():
    why = cmp.explain(_ill([4.0e14, 4.4e14], [3.0e14, 6.0e14], [False, False]))
    assert why.startswith("KernelBench's fp32 tolerance is tighter than the problem's fp32 error") \
        and "up to 4.4e+14 off a float64 forward" in why and "on 2 of 2 trials" in why and "6e+14 off it" in why


def test_a_kernel_further_from_float64_than_the_margin_stays_unexplained():
    assert cmp.explain(_ill([4.0e14, 4.4e14], [3.0e14, 6.7e14], [False, False])) == cmp.UNEXPLAINED


def test_a_reference_that_passes_against_its_float64_forward_leaves_a_mismatch_unexplained():
    assert cmp.explain(_ill([1e-6, 1e-6], [1e-6, 1e-6], [True, True])) == cmp.UNEXPLAINED


def test_a_float64_forward_that_failed_is_no_evidence():
    r = _ill([], [], [])
    r["kb"]["float64"] = {"error": "RuntimeError: expected scalar type Double but found Float"}
    assert cmp.explain(r) == cmp.UNEXPLAINED


def _as_run(kernel_err, as_run_err):
    """A TF32 entry of an ill-conditioned problem: its reference fails KernelBench's tolerance against
    float64 even with TF32 off, and the kernel is further from float64 than that strict reference."""
    r = _ill([1.1, 0.9], kernel_err, [False, False])
    r["kb"]["float64"]["ref_as_run_err"] = as_run_err
    return r


def test_a_kernel_within_the_margin_of_kernelbenchs_as_run_reference_error_is_explained():
    why = cmp.explain(_as_run([1.8, 1.5], [1.3, 1.2]))
    assert why.startswith("KernelBench's own reference, run as its eval runs it") and "up to 1.3 off a float64" in why \
        and "the kernel is 1.8 off it" in why


def test_a_kernel_beyond_the_margin_of_kernelbenchs_as_run_reference_error_stays_unexplained():
    assert cmp.explain(_as_run([1.8, 1.9], [1.3, 1.2])) == cmp.UNEXPLAINED


def test_an_unexplained_record_without_the_as_run_error_is_evaluated_again_and_an_explained_one_not(tmp_path):
    jobs = [h.Job(p, "default", "portfolio", "r00-c02", f"text {p}", tmp_path / f"{p}.py", "level3", True, {})
            for p in ("1_a", "2_b")]
    old = [dict(_ill([1.1, 0.9], k, [False, False]), setting="default", problem=p, kind="portfolio", sha=j.sha)
           for p, j, k in (("1_a", jobs[0], [1.8, 1.5]), ("2_b", jobs[1], [1.2, 0.9]))]
    assert cmp.explain(old[1]) != cmp.UNEXPLAINED
    assert [j.problem for j in h.pending(jobs, old)] == ["1_a"]


def test_a_progress_line_says_unexplained_so_far_while_the_problems_other_entries_run():
    r = dict(_ill([1.1, 0.9], [1.8, 1.5], [False, False]), setting="default")
    assert h.progress_line(1, 2, r, [r], waiting=True).endswith("DIFFER: unexplained so far (the problem's other "
                                                                 "entries are still running)")
    assert h.progress_line(1, 2, r, [r]).endswith("DIFFER: unexplained")


def _tf32_f64_pair(kernel_f64, peer_as_run, peer_f64, peer_problem="1_x"):
    """A `+tf32conv` entry and its problem's exact-fp32 seed, both failing KernelBench's strict
    check (the problem's fp32 error alone exceeds its tolerance), with float64 evidence."""
    tf32, seed = _tf32_pair([0.08, 0.7], peer_as_run, peer_problem)
    seed["kb"]["strict_fp32"] = {"correctness": False, "max_difference": [0.0006, 0.076]}
    tf32["kb"]["float64"] = {"kernel_err": kernel_f64, "ref_err": [0.0004, 0.075], "ref_passes": [False] * 2}
    seed["kb"]["float64"] = {"kernel_err": peer_f64, "ref_err": [0.0004, 0.075], "ref_passes": [False] * 2}
    return tf32, seed


def test_a_tf32_kernel_is_explained_by_a_float64_bound_on_kernelbenchs_reference_where_no_entry_passes_strict():
    tf32, seed = _tf32_f64_pair([0.083, 0.71], [0.092, 0.72], [0.0005, 0.036])
    why = cmp.explain(tf32, [seed, tf32])
    assert why.startswith("the kernel convolves in TF32") and "0.71 off a float64 forward" in why \
        and "at least 0.68 off it" in why


def test_a_tf32_kernel_beyond_the_margin_of_the_float64_bound_stays_unexplained():
    tf32, seed = _tf32_f64_pair([0.083, 1.1], [0.092, 0.72], [0.0005, 0.036])
    assert cmp.explain(tf32, [seed]) == cmp.UNEXPLAINED


def test_another_problems_float64_evidence_is_no_bound_for_a_tf32_kernel():
    tf32, seed = _tf32_f64_pair([0.083, 0.71], [0.092, 0.72], [0.0005, 0.036], peer_problem="2_y")
    assert cmp.explain(tf32, [seed]) == cmp.UNEXPLAINED


def test_a_large_mismatch_without_conv_is_unexplained():
    r = rec(kb_correct=False, error="Output mismatch (max difference 0.5)", max_difference=[0.5])
    assert cmp.explain(r) == cmp.UNEXPLAINED


def test_an_import_error_says_the_file_does_not_import_outside_krefine():
    r = rec(kb_correct=False, kb_compiled=False, error_name="builtins.ModuleNotFoundError",
            error="No module named 'tools'")
    assert cmp.explain(r).startswith("the file does not import outside krefine")


def test_kernelbenchs_cast_of_integer_inputs_to_fp32_is_named():
    r = rec(kb_correct=False, kb_compiled=False, error_name="builtins.NotImplementedError",
            error="\"nll_loss_forward_reduce_cuda_kernel_2d_index\" not implemented for 'Float'")
    assert cmp.explain(r).startswith("KernelBench casts every input to its precision")


def test_integer_inputs_are_a_feature_of_a_problem_with_class_targets():
    src = "class Model:\n    def forward(self, x, t):\n        return x\n\ndef get_inputs():\n" \
          "    return [torch.randn(4, 10), torch.randint(0, 10, (4,))]\n"
    assert "integer_inputs" in kb_features.features(src)


def test_a_reference_whose_source_reads_random_explains_krefines_refusal():
    kr_wrong = rec(kr_correct=False, reason="mismatch: trial 1: ...", diagnostics=["mismatch"],
                   features=["stochastic"])
    assert cmp.explain(kr_wrong).startswith("stochastic reference")


def test_krefines_correct_verdict_outweighs_a_source_that_reads_random():
    # the judge called the reference again with the RNG seeded otherwise and got the same outputs
    # (SwinMLP's `nn.Dropout(drop)` with drop = 0): not a stochastic reference
    kb_wrong = rec(kb_correct=False, error=MISMATCH, features=["stochastic"])
    assert not cmp.explain(kb_wrong).startswith("stochastic reference")


def test_krefines_stochastic_reference_diagnostic_explains_without_the_feature():
    r = rec(kr_correct=False, reason="stochastic_reference: dropout", diagnostics=["stochastic_reference"])
    assert cmp.explain(r).startswith("stochastic reference")


def test_kernelbench_correct_names_krefines_reason():
    r = rec(kr_correct=False, kr_verdict="rejected", reason="guard:library_ops: the forward runs aten.mm",
            diagnostics=["guard:library_ops"])
    assert cmp.explain(r) == "krefine's guard library_ops rejected it: guard:library_ops: the forward runs aten.mm"


def test_krefines_relative_l2_limit_is_named_when_it_alone_failed():
    r = rec(kr_correct=False, reason="mismatch: trial 1: rel L2 2e-3", diagnostics=["mismatch"],
            patterns=["rel_l2"])
    assert cmp.explain(r).startswith("krefine's relative-L2 limit")


def test_a_tf32_precision_kernel_on_a_conv_is_explained_when_only_krefine_says_incorrect():
    r = rec(kr_correct=False, reason="mismatch: small errors everywhere", diagnostics=["mismatch"],
            patterns=["reduced_precision"], features=["conv"])
    assert cmp.explain(r).startswith("the kernel computes at TF32-like precision")


def test_a_bench_that_judged_another_text_of_the_problem_says_so():
    r = dict(rec(kb_correct=False, error=MISMATCH), same_reference=False)
    assert cmp.explain(r).startswith("krefine judged another text")


def test_kernelbench_out_of_memory_is_explained():
    r = rec(kb_correct=False, error="OutOfMemoryError: CUDA out of memory. Tried to allocate 8 GiB")
    assert cmp.explain(r).startswith("KernelBench ran out of GPU memory")


def test_krefine_incorrect_without_a_reason_is_unexplained():
    assert cmp.explain(rec(kr_correct=False)) == cmp.UNEXPLAINED


def test_an_evaluation_without_a_kernelbench_verdict_is_not_a_disagreement():
    assert cmp.explain(rec(kb_correct=False, status="timeout", error="no result within 300 s")) == ""


# ---------------------------------------------------------------- figures

def test_agreement_share_counts_only_evaluations_with_a_kernelbench_verdict():
    recs = [rec(), rec(kb_correct=False, error=MISMATCH), rec(status="timeout", kb_correct=False)]
    s = cmp.summary(recs)
    assert (s["agree"], s["kb_verdicts"], s["agree_share"]) == (1, 2, 0.5)


def test_speedup_ratio_is_kernelbench_over_krefine_where_both_are_correct():
    recs = [rec(kr_speedup=2.0, kb_speedup=1.0), rec(kr_speedup=1.0, kb_speedup=1.5),
            rec(kr_correct=False, kb_speedup=9.0, reason="x", diagnostics=["mismatch"])]
    r = cmp.summary(recs)["ratio"]
    assert (r["n"], r["min"], r["max"], r["median"]) == (2, 0.5, 1.5, 1.0)


def test_spread_gives_inclusive_deciles():
    s = cmp.spread([float(x) for x in range(11)])
    assert (s["p10"], s["p90"], s["median"]) == (1.0, 9.0, 5.0)


def test_the_table_lists_every_disagreement_with_its_explanation():
    recs = [rec("1_a"), rec("2_b", kb_correct=False, error=MISMATCH, max_difference=[0.001], features=["conv"]),
            rec("3_c", kb_correct=False, error="Output mismatch (max difference 0.5)", max_difference=[0.5])]
    md = cmp.markdown(recs)
    section = md.split("## Disagreements (2)")[1]
    assert "2_b" in section and cmp.TF32_CONV in section and "3_c" in section and cmp.UNEXPLAINED in section


def test_kernelbenchs_static_refusal_is_shown_per_row_and_counted():
    refused, clean, old = rec("1_a"), rec("2_b"), rec("3_c")
    refused["kb"]["static_errors"] = ["Contains try-except block (potential fallback bypass)"]
    clean["kb"]["static_errors"] = []
    md = cmp.markdown([refused, clean, old])
    rows = {line.split(" | ")[0].strip("| "): line.split(" | ")[5] for line in md.splitlines() if line.startswith("| ")}
    assert rows["1_a"] == "Contains try-except block (potential fallback bypass)"
    assert rows["2_b"] == "pass" and rows["3_c"] == "—"
    assert cmp.summary([refused, clean, old])["static_refused"] == 1


# ---------------------------------------------------------------- the harness

def test_a_rerun_skips_evaluations_already_recorded(tmp_path):
    jobs = [h.Job(p, "default", "seed", "r00-c00", f"text {p}", tmp_path / f"{p}.py", "level1", True, {})
            for p in ("1_a", "2_b")]
    done = [{"setting": "default", "problem": "1_a", "kind": "seed", "sha": jobs[0].sha}]
    assert [j.problem for j in h.pending(jobs, done)] == ["2_b"]


def test_a_changed_text_is_evaluated_again(tmp_path):
    job = h.Job("1_a", "default", "best", "r00-c01", "new text", tmp_path / "1_a.py", "level1", True, {})
    done = [{"setting": "default", "problem": "1_a", "kind": "best", "sha": "0" * 16}]
    assert h.pending([job], done) == [job]


def test_a_strict_mismatch_recorded_before_the_float64_forward_is_evaluated_again(tmp_path):
    jobs = [h.Job(p, "default", "seed", "r00-c00", f"text {p}", tmp_path / f"{p}.py", "level1", True, {})
            for p in ("1_a", "2_b", "3_c")]
    strict_fail = {"error": MISMATCH, "strict_fp32": {"correctness": False}}
    done = [{"setting": "default", "problem": "1_a", "kind": "seed", "sha": jobs[0].sha, "kb": strict_fail},
            {"setting": "default", "problem": "2_b", "kind": "seed", "sha": jobs[1].sha,
             "kb": {**strict_fail, "float64": {"error": "no float64"}}},
            {"setting": "default", "problem": "3_c", "kind": "seed", "sha": jobs[2].sha,
             "kb": {"error": MISMATCH, "strict_fp32": {"correctness": True}}}]
    assert [j.problem for j in h.pending(jobs, done)] == ["1_a"]


def _harness(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "agent.bench.kb_harness", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=120)


def _bench(tmp_path) -> Path:
    run = tmp_path / "bench" / "default" / "1_a"
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"problem": {"path": "1_a.py", "source": ""}}))
    return tmp_path / "bench"


@pytest.mark.parametrize("case", ["missing_bench", "not_a_bench", "no_kb_src", "missing_level"])
def test_bad_input_is_one_line_and_exit_2(tmp_path, case):
    kb = tmp_path / "kb"
    (kb / "src" / "kernelbench").mkdir(parents=True)
    (kb / "src" / "kernelbench" / "eval.py").write_text("")
    level = tmp_path / "level1"
    level.mkdir()
    bench = _bench(tmp_path)
    args = {"missing_bench": [tmp_path / "nowhere", "--kb", kb, "--levels", level],
            "not_a_bench": [level, "--kb", kb, "--levels", level],
            "no_kb_src": [bench, "--kb", tmp_path, "--levels", level],
            "missing_level": [bench, "--kb", kb, "--levels", tmp_path / "level9"]}[case]
    p = _harness(*args, "--out", tmp_path / "out.jsonl")
    assert (p.returncode, len(p.stderr.strip().splitlines())) == (2, 1), p.stderr


def _portfolio_bench(tmp_path, completions) -> tuple[Path, dict]:
    """A real run directory (the loop with a scripted judge) whose seed portfolio has three
    correct entries, the second the fastest, laid out as a bench's problem 1_a."""
    from run_fixtures import loop_run
    entries = [("default", "correct 0.5"), ("default+tf32x3", "correct 1.3"), ("templates", "correct 0.9")]
    make = lambda problem, device: [(label, f"# judge: {how}\nclass ModelNew: pass\n# {label}\n")  # noqa: E731
                                    for label, how in entries]
    loop_run(tmp_path, completions, make_seed=make,
             **{"search.seed_kernel": "inductor", "budget.candidates_per_round": 2})
    run = tmp_path / "bench" / "default" / "1_a"
    run.parent.mkdir(parents=True)
    (tmp_path / "run").rename(run)
    return tmp_path / "bench", {"1_a": ("level1", tmp_path / "tiny.py")}


def test_a_bench_without_a_best_offers_the_seed_and_the_portfolio_s_fastest_correct_entry(tmp_path):
    from run_fixtures import judged
    bench, index = _portfolio_bench(tmp_path, [judged("incorrect")] * 2)
    jobs, unknown = h.collect_jobs(bench, "default", index)
    assert [(j.kind, j.candidate) for j in jobs] == [("seed", "r00-c00"), ("portfolio", "r00-c01")] and not unknown
    assert "# default+tf32x3" in jobs[1].text and jobs[1].krefine["speedup_eager"] == 1.3


def test_a_bench_with_a_best_offers_seed_portfolio_and_best(tmp_path):
    from run_fixtures import judged
    bench, index = _portfolio_bench(tmp_path, [judged("correct", 2.0)] * 2)
    jobs, _ = h.collect_jobs(bench, "default", index)
    assert [j.kind for j in jobs] == ["seed", "portfolio", "best"]


# ---------------------------------------------------------------- kb_eval's float64 evidence

ILL_REF = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.big = nn.Parameter(torch.tensor(3.0e7))

    def forward(self, x):
        return (x + self.big) - self.big     # fp32 keeps ~2 of x's bits here; float64 keeps x

def get_inputs():
    return [torch.randn(64)]

def get_init_inputs():
    return []
'''


def _kb_stub(tmp_path):
    """The KernelBench functions float64_check calls, as eval.py defines them, on cpu."""
    import types
    import importlib.util

    import torch

    def load_original_model_and_inputs(src, ctx):
        exec(src, ctx)
        return ctx["Model"], ctx["get_init_inputs"], ctx["get_inputs"]

    def load_custom_model_with_tempfile(src, entry_point):
        path = tmp_path / "candidate_tmp.py"
        path.write_text(src)
        spec = importlib.util.spec_from_file_location("candidate_tmp", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return getattr(module, entry_point), types.SimpleNamespace(name=str(path))

    return types.SimpleNamespace(
        load_original_model_and_inputs=load_original_model_and_inputs, set_seed=torch.manual_seed,
        _process_input_tensor=lambda x, device, backend, precision: x.to(device=device, dtype=precision)
        if torch.is_tensor(x) else x,
        load_custom_model_with_tempfile=load_custom_model_with_tempfile,
        get_tolerance_for_precision=lambda precision: 1e-2)


def test_the_float64_forward_measures_the_reference_and_the_kernel_against_it(tmp_path):
    import torch
    from agent.bench import kb_eval
    cand = ILL_REF.replace("class Model(", "class ModelNew(")
    out = kb_eval.float64_check(_kb_stub(tmp_path), ILL_REF, cand, torch.device("cpu"), torch.float32)
    assert out["error"] is None and len(out["ref_err"]) == kb_eval.CORRECT_TRIALS
    assert min(out["ref_err"]) > 0.1 and out["kernel_err"] == out["ref_err"] and not any(out["ref_passes"])
    assert out["ref_as_run_err"] == out["ref_err"]   # on a cpu TF32 flags change nothing


def test_the_as_run_reference_runs_under_the_callers_tf32_flags_and_they_are_restored(tmp_path, monkeypatch):
    import builtins
    import torch
    from agent.bench import kb_eval
    seen = []
    monkeypatch.setattr(builtins, "_kb_tf32_seen", seen, raising=False)
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", True)
    ref = ILL_REF.replace("    def forward(self, x):\n",
                          "    def forward(self, x):\n        _kb_tf32_seen.append(torch.backends.cudnn.allow_tf32)\n")
    out = kb_eval.float64_check(_kb_stub(tmp_path), ref, ref.replace("class Model(", "class ModelNew("),
                                torch.device("cpu"), torch.float32)
    assert out["error"] is None and torch.backends.cudnn.allow_tf32 is True
    # a trial: the strict reference, the kernel, the as-run reference, the float64 one
    assert seen == [False, False, True, False] * kb_eval.CORRECT_TRIALS


def test_a_float64_forward_that_raises_is_reported_not_raised(tmp_path):
    import torch
    from agent.bench import kb_eval
    ref = ILL_REF.replace("return (x + self.big) - self.big", "return x @ torch.ones(64, 2)")
    out = kb_eval.float64_check(_kb_stub(tmp_path), ref, ref.replace("class Model(", "class ModelNew("),
                                torch.device("cpu"), torch.float32)
    assert set(out) == {"error"} and "RuntimeError" in out["error"]


def test_the_strict_recheck_builds_both_models_as_eval_does_and_restores_the_tf32_flags(tmp_path):
    import types

    import torch
    from agent.bench import kb_eval
    kb = _kb_stub(tmp_path)

    def run_and_check_correctness(ref, new, get_inputs, metadata, num_correct_trials, seed, device, backend,
                                  precision):
        torch.manual_seed(seed)
        x = get_inputs()[0]
        ok = torch.equal(ref(x), new(x)) and not torch.backends.cuda.matmul.allow_tf32
        metadata["correctness_trials"] = f"({int(ok)} / 1)"
        return types.SimpleNamespace(correctness=ok)
    kb.run_and_check_correctness = run_and_check_correctness
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        out = kb_eval.strict_fp32_check(kb, ILL_REF, ILL_REF.replace("class Model(", "class ModelNew("),
                                        torch.device("cpu"), torch.float32)
        assert out["correctness"] is True and torch.backends.cuda.matmul.allow_tf32 is True
        assert not (tmp_path / "candidate_tmp.py").exists()
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before
