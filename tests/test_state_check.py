"""The module and the process left as Model leaves them (tools/judge/state_check.py,
tools/sandbox/state_ops.py, tools/sandbox/ownership.py's overlapping_outputs, the bool rule
of tools/judge/ownership.py): the pieces on their own, on a CPU. The verdicts they give
whole candidates are tests/exploits/'s cases (weights_folded_in_place,
batchnorm_running_stats_dropped, aliased_outputs, reseeds_global_rng, bool_mask_by_torch
and their ok_ counterparts)."""
from __future__ import annotations

import textwrap

import pytest
import torch

from tools.judge.ownership import right_without_kernels
from tools.judge.reference import build_reference
from tools.judge.state_check import plan
from tools.problem import load_problem
from tools.sandbox.ownership import overlapping_outputs
from tools.sandbox.state_ops import fingerprints, named_tensors, rng_states, same_states
from tools.settings import TrialSettings
from tools.verdict import Status


class _Session:
    """What plan() reads of a judge session: its reference model (called as the session
    calls it for its references), fresh ones, the seeds, the problem, the device."""

    def __init__(self, problem, calls: int = 2):
        from tools.problem import make_inputs
        self.problem, self.dev, self.seeds = problem, "cpu", [11, 12]
        self.settings = type("S", (), {"test": TrialSettings()})()
        self._model = self.fresh_reference_model()
        with torch.no_grad():
            for seed in self.seeds[:calls]:
                self._model(*make_inputs(problem.module, seed, "cpu"))

    def reference_model(self):
        return self._model

    def fresh_reference_model(self):
        return build_reference(self.problem, "cpu", 0, self.settings.test)


def _problem(tmp_path, body: str):
    path = tmp_path / "problem.py"
    path.write_text("import torch\nimport torch.nn as nn\n\n" + textwrap.dedent(body))
    return load_problem(path)


BATCHNORM = """
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm1d(8)

    def forward(self, x):
        return self.bn(x)


def get_inputs():
    return [torch.randn(16, 8)]


def get_init_inputs():
    return []
"""


def test_a_training_batchnorm_s_running_statistics_are_what_its_forward_changes(tmp_path):
    p = plan(_Session(_problem(tmp_path, BATCHNORM)))
    assert list(p["changed"]) == ["bn.running_mean", "bn.running_var", "bn.num_batches_tracked"]
    assert sorted(p["names"]) == ["bn.bias", "bn.weight"] and p["seeds"] == [11, 12] and p["left_out"] == []


def test_the_running_statistics_carry_a_float64_truth_that_rounds_to_them(tmp_path):
    p = plan(_Session(_problem(tmp_path, BATCHNORM)))
    assert sorted(p["truth"]) == ["bn.running_mean", "bn.running_var"]   # the batch count is no float
    assert p["truth"]["bn.running_var"].dtype == torch.float64
    assert torch.allclose(p["truth"]["bn.running_var"].float(), p["changed"]["bn.running_var"], atol=1e-6)


def test_a_model_whose_forward_changes_nothing_is_checked_without_a_fresh_call(tmp_path):
    p = plan(_Session(_problem(tmp_path, BATCHNORM.replace("return self.bn(x)", "return self.bn.weight * x"))))
    assert p["changed"] == {} and p["seeds"] is None
    assert sorted(p["names"]) == ["bn.bias", "bn.num_batches_tracked", "bn.running_mean", "bn.running_var",
                                  "bn.weight"]


def test_a_buffer_the_forward_fills_from_outside_torch_s_generators_is_left_out_not_judged(tmp_path):
    # (a draw from torch's generators repeats: the inputs' seed sets them before each call)
    body = BATCHNORM.replace("return self.bn(x)", "self.bn.running_mean.add_(torch.tensor(list(__import__('os')"
                             ".urandom(8)), dtype=torch.float32))\n        return x * 2")
    p = plan(_Session(_problem(tmp_path, body)))
    assert p["left_out"] == ["bn.running_mean"] and "bn.running_mean" not in p["changed"]


def test_a_model_without_parameters_or_buffers_has_no_state_to_check(tmp_path):
    body = BATCHNORM.replace("self.bn = nn.BatchNorm1d(8)", "self.k = 2").replace("return self.bn(x)", "return x * 2")
    p = plan(_Session(_problem(tmp_path, body)))
    assert p["names"] == [] and p["changed"] == {}


def test_named_tensors_include_non_persistent_buffers():
    m = torch.nn.Linear(2, 3)
    m.register_buffer("scratch", torch.zeros(3), persistent=False)
    assert sorted(named_tensors(m)) == ["bias", "scratch", "weight"]


def test_a_fingerprint_changes_when_a_weight_is_scaled_in_place():
    m = torch.nn.Linear(4, 4)
    before = fingerprints(named_tensors(m))
    with torch.no_grad():
        m.weight.mul_(2.0)
    after = fingerprints(named_tensors(m))
    assert not torch.equal(before["weight"], after["weight"]) and torch.equal(before["bias"], after["bias"])


def test_manual_seed_and_a_draw_change_the_global_random_state_and_arithmetic_does_not():
    torch.manual_seed(5)
    first = rng_states()
    torch.ones(3).mul(2)
    assert same_states(first, rng_states())
    torch.rand(1)
    assert not same_states(first, rng_states())
    torch.manual_seed(5)
    assert same_states(first, rng_states())
    torch.manual_seed(6)
    assert not same_states(first, rng_states())


@pytest.mark.parametrize("outputs, pairs", [
    (lambda b: [b, b], [[0, 1]]),
    (lambda b: [b[:5], b[5:]], []),                  # halves of one buffer
    (lambda b: [b[:, 0], b[:, 1]], []),              # interleaved columns
    (lambda b: [b[::2], b[1::2]], []),               # interleaved rows
    (lambda b: [b[:6], b[5:]], [[0, 1]]),            # one row in common
    (lambda b: [b.view(-1), b.t()], [[0, 1]]),       # two views of all of it
    (lambda b: [b, torch.empty(3), b[0]], [[0, 2]]),
    (lambda b: [b[:0], b[:0]], []),                  # empty
    (lambda b: [b[3:, 1], b[4:, 2]], []),            # two columns of a slice: marks over their reach only
    (lambda b: [b.view(-1)[:4], b[0]], [[0, 1]]),    # the same first element
])
def test_outputs_share_memory_only_where_an_element_is_shared(outputs, pairs):
    assert overlapping_outputs(outputs(torch.empty(10, 4))) == pairs


def test_views_of_other_element_sizes_are_compared_byte_by_byte():
    b = torch.empty(8)
    assert overlapping_outputs([b[:4], b.view(torch.int32)[4:]]) == []
    assert overlapping_outputs([b[:4], b.view(torch.int32)[3:]]) == [[0, 1]]


def test_complex128_elements_interleaved_in_one_buffer_are_not_shared():
    b = torch.empty(4, 6, 2, dtype=torch.complex128)
    assert overlapping_outputs([b[..., 0], b[..., 1]]) == []
    assert overlapping_outputs([b.view(torch.float64)[..., :2], b[..., 0]]) == [[0, 1]]


def test_a_bool_mask_right_on_both_values_counts_as_right():
    ref = torch.tensor([True, False, True, False])
    assert right_without_kernels(ref.clone(), ref, 0.0, 0.0) == {"counted": 4, "right": 4}


@pytest.mark.parametrize("fill", [True, False])
def test_a_bool_buffer_filled_with_one_value_counts_as_not_right(fill):
    ref = torch.tensor([True, False, True, False])
    assert right_without_kernels(torch.full((4,), fill), ref, 0.0, 0.0)["right"] == 0


def test_a_bool_reference_of_one_value_is_not_counted():
    ref = torch.zeros(4, dtype=torch.bool)
    assert right_without_kernels(ref.clone(), ref, 0.0, 0.0) == {"counted": 0, "right": 0}


def test_a_complex_output_is_counted_component_by_component():
    ref = torch.tensor([1 + 2j, 3 - 1j], dtype=torch.complex64)
    assert right_without_kernels(ref.clone(), ref, 1e-4, 1e-4) == {"counted": 4, "right": 4}


@pytest.mark.slow
def test_the_seed_of_a_stateful_cell_with_a_training_batchnorm_is_correct_state_included():
    """Judged call by call (its hidden state is a plain tensor attribute) and its running
    statistics checked after the plan's calls: both orders of trials.py's state step."""
    from pathlib import Path

    from shared_judges import verdict_of
    from tools.dialect.kernelbook import seed_candidate
    problem = load_problem(Path(__file__).parent / "problems" / "level3" / "stateful_cell_batchnorm.py")
    verdict = verdict_of(problem, seed_candidate(problem, "cpu"))
    assert verdict.status is Status.CORRECT, verdict.feedback
    assert "stateful" in verdict.checks and verdict.checks["module_state"]["changed_by_model"] == 3
