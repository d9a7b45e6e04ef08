"""Who wrote the outputs and whose memory they are in (tools/judge/ownership.py,
tools/sandbox/ownership.py): the pieces, on plain tensors, and one problem whose
reference output is its input. The cheats themselves are in tests/exploits/r3_*.py."""
from __future__ import annotations

import gc
import textwrap
import weakref

import pytest
import torch

from tools.judge import ownership
from tools.sandbox.ownership import remember, shared_memory


class _Run:
    def __init__(self, checks):
        self.checks, self.flags, self.diags = checks, [], []

    def flag(self, f):
        self.flags.append(f)

    def diag(self, kind, message, line=None):
        self.diags.append((kind, message))


def test_values_right_without_the_kernels_are_counted():
    ref = torch.tensor([1.0, 2.0, 3.0, 4.0])
    got = ownership.right_without_kernels(torch.tensor([1.0, float("nan"), 3.0, 0.0]), ref, 1e-4, 1e-4)
    assert got == {"counted": 4, "right": 2}


def test_zeros_and_non_finite_reference_values_are_not_counted():
    ref = torch.tensor([0.0, float("inf"), 5.0])
    assert ownership.right_without_kernels(torch.zeros(3), ref, 1e-4, 1e-4) == {"counted": 1, "right": 0}


def test_integer_outputs_compare_exactly_and_bool_outputs_are_not_counted():
    assert ownership.right_without_kernels(torch.tensor([3, 7]), torch.tensor([3, 8]), 0, 0) == {"counted": 2, "right": 1}
    assert ownership.right_without_kernels(torch.tensor([True]), torch.tensor([True]), 0, 0)["counted"] == 0


def test_an_integer_types_max_is_not_counted():
    # an unwritten integer buffer holds its max (outputs.py): a byte output has it by chance 1 in 256
    ref = torch.tensor([255, 3, 255, 9], dtype=torch.uint8)
    got = ownership.right_without_kernels(torch.full((4,), 255, dtype=torch.uint8), ref, 0, 0)
    assert got == {"counted": 2, "right": 0}


def test_fp8_outputs_are_counted_as_floats():
    ref = torch.tensor([1.0, 2.0, float("nan"), 0.0]).to(torch.float8_e4m3fn)
    got = ownership.right_without_kernels(torch.tensor([1.0, 0.5, 1.0, 0.0]).to(torch.float8_e4m3fn), ref, 0.0, 0.0)
    assert got == {"counted": 2, "right": 1}


def test_a_view_of_an_input_shares_its_memory():
    x = torch.randn(4, 5)
    assert shared_memory([x.t()], [x], None, []) == ["output 0 shares memory with input #0"]
    assert shared_memory([x.t().contiguous()], [x], None, []) == []


def test_a_parameter_returned_shares_the_models_memory():
    lin = torch.nn.Linear(3, 3)
    assert shared_memory([lin.weight.detach()], [], lin, []) == ["output 0 shares memory with the model's weight"]


def test_an_earlier_output_counts_only_while_it_is_alive():
    earlier: list = []
    kept = torch.randn(8)
    remember([kept], earlier)
    assert shared_memory([kept], [], None, earlier) == ["output 0 shares memory with an earlier call's output"]
    gone = torch.randn(8)
    remember([gone], earlier := [])
    ref = weakref.ref(gone)
    del gone
    gc.collect()
    assert ref() is None and shared_memory([torch.randn(8)], [], None, earlier) == []


def test_the_trial_without_kernels_is_one_of_the_trials_and_fixed_by_the_seeds():
    seeds = [11, 22, 33, 44, 55]
    assert 0 <= ownership.off_trial(seeds) < len(seeds)
    assert ownership.off_trial(seeds) == ownership.off_trial(list(seeds))
    assert len({ownership.off_trial([s, s + 1, s + 2]) for s in range(40)}) == 3


def test_right_values_without_the_kernels_reject_with_the_share_in_the_message():
    run = _Run({"output_writers": {"outputs": [{"counted": 100, "right": 40}]}})
    assert ownership.decide(run, None).value == "rejected"
    assert run.diags[0][0] == "guard:output_writer" and "40 of 100" in run.diags[0][1]
    assert run.flags == ["library_ops"]


def test_a_few_coincidences_are_not_a_verdict():
    run = _Run({"output_writers": {"outputs": [{"counted": 100000, "right": 3}]}})
    assert ownership.decide(run, None) is None and not run.diags


def test_an_alias_is_not_held_against_a_candidate_when_the_reference_aliases_too():
    run = _Run({"output_aliases": ["output 0 shares memory with input #0"],
                "output_writers": {"outputs": [{"counted": 10, "right": 10}]}})
    assert ownership.decide(run, "output 0 shares memory with input #0") is None
    assert "no kernel work" in run.checks["output_ownership"]


IDENTITY = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x.view(-1)


def get_inputs():
    return [torch.randn(8, 32)]


def get_init_inputs():
    return []
'''

COPY = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def copy_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs))


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty(x.numel(), device=x.device, dtype=x.dtype)
        copy_kernel[(1,)](x.contiguous(), out, BLOCK=256)
        return out
'''


@pytest.fixture(scope="module")
def identity_verdict(tmp_path_factory):
    from tools.judge import evaluate
    from tools.problem import load_problem
    path = tmp_path_factory.mktemp("identity") / "identity.py"
    path.write_text(textwrap.dedent(IDENTITY))
    return evaluate(load_problem(path), COPY, device="cpu", profile=False)


def test_a_problem_whose_reference_returns_its_input_says_it_has_no_kernel_work(identity_verdict):
    assert identity_verdict.status.value == "correct"
    assert "no kernel work" in identity_verdict.checks["output_ownership"]


BYTES = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 3 + 7, x.to(torch.int8) * 5 - 3


def get_inputs():
    return [torch.randint(0, 256, (256,), dtype=torch.uint8)]


def get_init_inputs():
    return []
'''

BYTES_NEW = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def bytes_kernel(x_ptr, u_ptr, s_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(u_ptr + offs, (x * 3 + 7).to(tl.uint8))
    tl.store(s_ptr + offs, (x.to(tl.int8) * 5 - 3).to(tl.int8))


class ModelNew(nn.Module):
    def forward(self, x):
        u = torch.empty_like(x)
        s = torch.empty(x.shape, device=x.device, dtype=torch.int8)
        bytes_kernel[(1,)](x, u, s, BLOCK=256)
        return u, s
'''


@pytest.mark.slow   # a judge session of its own on a CPU: about 8-11 s
def test_a_candidate_with_byte_outputs_is_judged(tmp_path):
    # uint8 and int8 outputs: the judge's poison fill of their freed blocks raised (-0x5EED fits no byte)
    from shared_judges import verdict_of
    from tools.problem import load_problem
    path = tmp_path / "bytes.py"
    path.write_text(BYTES)
    verdict = verdict_of(load_problem(path), BYTES_NEW)
    assert verdict.status.value == "correct", verdict.diagnostics


@pytest.mark.gpu
def test_on_a_gpu_a_candidate_with_byte_outputs_is_judged(tmp_path):
    from tools.judge import evaluate
    from tools.problem import load_problem
    path = tmp_path / "bytes.py"
    path.write_text(BYTES)
    verdict = evaluate(load_problem(path), BYTES_NEW, device="cuda", profile=False)
    assert verdict.status.value == "correct", verdict.diagnostics


ONE_TUPLE = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return (x * 2,)


def get_inputs():
    return [torch.randn(64)]


def get_init_inputs():
    return []
'''

DOUBLED = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def double_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) * 2)


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        double_kernel[(1,)](x, out, BLOCK=64)
        return RETURNED
'''


@pytest.fixture(scope="module")
def one_tuple(tmp_path_factory):
    from tools.problem import load_problem
    path = tmp_path_factory.mktemp("one_tuple") / "one_tuple.py"
    path.write_text(ONE_TUPLE)
    return load_problem(path)


def test_a_bare_tensor_for_a_models_one_tuple_is_incorrect(one_tuple):
    # was correct: the judge compared the tensors and not what held them (a caller's out[0] differs)
    from shared_judges import verdict_of
    verdict = verdict_of(one_tuple, DOUBLED.replace("RETURNED", "out"))
    assert verdict.status.value == "incorrect"
    assert "returned a tensor; Model returns a tuple of 1 tensor" in verdict.diagnostics[0].message


def test_a_list_for_a_models_tuple_is_incorrect(one_tuple):
    from shared_judges import verdict_of
    verdict = verdict_of(one_tuple, DOUBLED.replace("RETURNED", "[out]"))
    assert verdict.status.value == "incorrect"
    assert "returned a list of 1 tensor; Model returns a tuple of 1 tensor" in verdict.diagnostics[0].message


@pytest.mark.slow   # a judge session of its own on a CPU: about 8-11 s
def test_a_candidate_given_inputs_that_require_grad_is_judged(tmp_path):
    # the worker wrote the next trial's values into the inputs outside no_grad: "a leaf Variable that requires
    # grad is being used in an in-place operation", a runtime_error of every candidate
    from shared_judges import verdict_of
    from tools.problem import load_problem
    path = tmp_path / "leaf.py"
    path.write_text(ONE_TUPLE.replace("torch.randn(64)", "torch.randn(64, requires_grad=True)"))
    verdict = verdict_of(load_problem(path), DOUBLED.replace("RETURNED", "(out,)"))
    assert verdict.status.value == "correct", verdict.diagnostics
