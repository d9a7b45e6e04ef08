"""A reference that keeps state between calls is judged as KernelBench calls it: a fresh
ModelNew called in the reference's order, each call against the reference's call at the
same place (tools/judge/stateful.py, tools/judge/trials.py)."""
from pathlib import Path

import pytest

from tests.shared_judges import verdict_of
from tools.problem import load_problem

PROBLEMS = Path(__file__).parent / "problems"

KERNEL = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def step(x_ptr, h_ptr, hn_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    z = tl.load(x_ptr + offs, mask=m) + tl.load(h_ptr + offs, mask=m)
    e = tl.exp(-2.0 * z)
    h = (1.0 - e) / (1.0 + e)
    tl.store(hn_ptr + offs, h, mask=m)
    tl.store(out_ptr + offs, 2.0 * h, mask=m)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.h = torch.randn(4, 8) * 0.5

    def forward(self, x):
        h = self.h.to(x.device).contiguous()
        hn, out = torch.empty_like(x), torch.empty_like(x)
        step[(1,)](x.contiguous(), h, hn, out, x.numel(), BLOCK=32)
        {store}
        return out
'''
CARRIES = KERNEL.replace("{store}", "self.h = hn")
FORGETS = KERNEL.replace("{store}", "pass")           # every call starts from the initial state
# right on every first call, but keeps a state the reference never has
OTHER_STATE = CARRIES.replace("tl.store(hn_ptr + offs, h, mask=m)", "tl.store(hn_ptr + offs, 0.5 * h, mask=m)")


@pytest.fixture(scope="module")
def stateful():
    return load_problem(PROBLEMS / "stateful_tanh.py")


def test_a_kernel_that_carries_the_state_as_the_reference_does_is_correct(stateful):
    assert verdict_of(stateful, CARRIES).status.value == "correct"


def test_the_verdict_says_the_calls_were_compared_in_the_reference_s_order(stateful):
    assert "called 7 times in the reference's order" in verdict_of(stateful, CARRIES).checks["stateful"]


def test_a_kernel_that_forgets_the_state_fails_on_the_repeated_call(stateful):
    v = verdict_of(stateful, FORGETS)
    assert v.status.value == "incorrect" and "reference's second call" in v.diagnostics[0].message


def test_a_kernel_that_stores_another_state_is_incorrect(stateful):
    assert verdict_of(stateful, OTHER_STATE).status.value == "incorrect"


def test_the_kernel_less_call_is_still_made_for_a_stateful_reference(stateful):
    writers = verdict_of(stateful, CARRIES).checks["output_writers"]
    assert writers["skipped_launches"] == 1 and writers["outputs"][0]["counted"] > 0


def test_a_reference_no_fresh_model_repeats_is_still_unmatchable():
    v = verdict_of(load_problem(PROBLEMS / "call_counter.py"), CARRIES)
    assert "unreproducible_reference" in v.flags


def test_the_float64_truth_carries_a_plain_tensor_state_from_call_to_call(stateful):
    import torch
    from tools.judge.reference import precise_sequence, sequence_outputs
    from tools.problem import build_model
    from tools.settings import EvalSettings
    s = EvalSettings().test
    build = lambda: build_model(stateful.module.Model, stateful.module, s.init_seed, "cpu")  # noqa: E731
    fp32 = sequence_outputs(build(), stateful.module, [1, 1, 2], "cpu", s)
    fp64 = precise_sequence(build(), stateful.module, [1, 1, 2], "cpu")
    assert all(w[0].dtype == torch.float64 and torch.allclose(w[0].float(), f[0], atol=1e-5)
               for w, f in zip(fp64, fp32)) and not torch.allclose(fp32[0][0], fp32[1][0])


@pytest.mark.gpu
def test_on_a_gpu_a_kernel_that_carries_the_state_is_correct_and_timed(stateful):
    v = verdict_of(stateful, CARRIES, device="cuda")
    assert v.status.value == "correct" and v.speedup_eager and \
        v.checks["timed_outputs_rechecked"].startswith("not rechecked")
