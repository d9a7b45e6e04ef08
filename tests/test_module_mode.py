"""[eval] module_mode: Model and ModelNew run as the problem file leaves them (training
mode, as KernelBench runs them) unless "eval" asks for inference semantics; a reference
that is random in its mode gets no candidate a `correct` verdict. On CPU (Triton's
interpreter), small shapes."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from shared_judges import verdict_of
from tools.problem import load_problem
from tools.settings import EvalSettings, SettingsError, TrialSettings, build
from tools.verdict import Status

PROBLEMS = Path(__file__).parent / "problems"


def _judge(problem: str, candidate: str, module_mode: str | None = None, src: str | None = None,
           problems: Path = PROBLEMS):
    # the verdict is what is tested here: two trials, no sm_90 compile of the kernels
    test = dataclasses.replace(TrialSettings(), trials=2, gpu_cross_compile=False,
                               **({"module_mode": module_mode} if module_mode else {}))
    return verdict_of(load_problem(problems / f"{problem}.py"), src or (PROBLEMS / f"{candidate}.py").read_text(),
                      device="cpu", settings=EvalSettings(test=test))


def test_the_default_module_mode_is_train():
    assert TrialSettings().module_mode == "train"


def test_a_running_statistics_batchnorm_is_incorrect_by_default():
    verdict = _judge("batchnorm_relu", "batchnorm_relu_running_stats")
    assert verdict.status is Status.INCORRECT, verdict.feedback
    assert any(d.kind == "mismatch" for d in verdict.diagnostics), verdict.feedback


def test_a_running_statistics_batchnorm_is_correct_in_eval_mode():
    verdict = _judge("batchnorm_relu", "batchnorm_relu_running_stats", module_mode="eval")
    assert verdict.status is Status.CORRECT, verdict.feedback
    assert verdict.checks["module_mode"] == "eval"


def test_a_batch_statistics_batchnorm_is_correct_by_default():
    verdict = _judge("batchnorm_relu", "batchnorm_relu_batch_stats")
    assert verdict.status is Status.CORRECT, verdict.feedback
    assert verdict.checks["module_mode"] == "train"


def test_a_batch_statistics_batchnorm_that_never_updates_its_running_statistics_is_incorrect():
    verdict = _judge("batchnorm_relu", "batchnorm_relu_no_running_update")
    assert verdict.status is Status.INCORRECT, verdict.feedback
    state = [d.message for d in verdict.diagnostics if d.kind == "module_state"]
    assert state and "bn.running_mean" in state[0], verdict.feedback


def test_a_training_mode_dropout_reference_is_incorrect_naming_the_dropout_and_the_eval_option():
    verdict = _judge("dropout", "double")
    assert verdict.status is Status.INCORRECT
    stochastic = [d for d in verdict.diagnostics if d.kind == "stochastic_reference"]
    assert stochastic and "drop = Dropout(p=0.5)" in stochastic[0].message, verdict.feedback
    assert "--set eval.module_mode=eval" in verdict.feedback


def test_a_stochastic_reference_verdict_carries_the_flag_the_loop_stops_on():
    assert "stochastic_reference" in _judge("dropout", "double").flags


def test_a_dropout_reference_in_eval_mode_is_reproducible_and_its_identity_kernel_correct():
    verdict = _judge("dropout", "double", module_mode="eval")
    assert verdict.status is Status.CORRECT, verdict.feedback


def test_a_reference_drawing_random_numbers_without_a_dropout_module_is_stochastic_too():
    verdict = _judge("random_noise", "double", module_mode="eval")
    assert verdict.status is Status.INCORRECT
    assert [d.kind for d in verdict.diagnostics][:1] == ["stochastic_reference"], verdict.feedback
    assert "module_mode=eval" not in verdict.feedback   # eval mode would not help here


def test_a_reference_drawing_its_own_numbers_in_training_mode_is_advised_inputs_or_a_training_only_draw():
    # a seed now draws such numbers with Triton (tools/kernels/draws.py): the judge's advice is the one the
    # seed's refusal gave before
    verdict = _judge("random_noise", "double")
    stochastic = [d.message for d in verdict.diagnostics if d.kind == "stochastic_reference"]
    assert stochastic and "give them as inputs or buffers" in stochastic[0], verdict.feedback
    assert "only in training (under `if self.training:`)" in stochastic[0]


@pytest.mark.parametrize("value", ["inference", "Eval", 1])
def test_a_module_mode_other_than_train_or_eval_is_a_one_line_settings_error(value):
    with pytest.raises(SettingsError, match=r"^agent\.toml \[eval\]\.module_mode: .* is not one of 'train', 'eval'$"):
        build(TrialSettings, {"module_mode": value}, "agent.toml [eval]")


def test_the_seed_cache_keys_differ_between_module_modes():
    from tools.dialect.seedcache import capture_cache_key, seed_cache_key
    args = ("class Model: ...", "cuda", "2.13.0")
    assert seed_cache_key(*args, "train") != seed_cache_key(*args, "eval")
    assert capture_cache_key(*args, "train") != capture_cache_key(*args, "eval")


@pytest.mark.slow
def test_a_seed_asked_for_in_eval_mode_computes_the_eval_mode_batchnorm():
    from tools.dialect.seedcache import cached_seed
    problems = Path(__file__).parent / "dialect" / "problems"   # BatchNorm2d of a batch with mean 0.5
    src = cached_seed(load_problem(problems / "batchnorm_train.py"), "cpu", None, "eval")
    verdict = _judge("batchnorm_train", "", module_mode="eval", src=src, problems=problems)
    assert verdict.status is Status.CORRECT, verdict.feedback


def test_a_capture_records_its_module_mode_in_its_header():
    from tools.dialect.inductor_capture import Capture, capture_text, read_capture
    assert read_capture(capture_text(Capture(code="x = 1\n", module_mode="eval"))).module_mode == "eval"


def test_krefine_eval_set_module_mode_eval_judges_inference_semantics():
    import json
    import subprocess
    import sys
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-m", "agent.cli", "eval", "tests/problems/batchnorm_relu.py",
                           "tests/problems/batchnorm_relu_running_stats.py", "--device", "cpu", "--keep-judge", "0",
                           "--json", "--set", "eval.module_mode=eval"], capture_output=True, text=True, cwd=root,
                          timeout=600)
    verdict = json.loads(done.stdout.strip().splitlines()[-1])
    assert done.returncode == 0 and verdict["verdict"] == "correct", done.stderr[-1000:]
