"""A failed torch.compile in one line (tools/errors.py `describe_compile_error`): a Dynamo
graph break as its kind, explanation and the user's line; other errors as they are."""
from __future__ import annotations

import pytest

from tools.errors import describe_compile_error

# torch 2.13's Dynamo message for `if mask.any():` (hints and links cut to one each)
GRAPH_BREAK = """Data-dependent branching
  Explanation: Detected data-dependent branching (e.g. `if my_tensor.sum() > 0:`). Dynamo does not support tracing dynamic control flow.
  Hint: Use `torch.cond` to express dynamic control flow.

  Developer debug context: attempted to jump with TensorVariable()

 For more details about this graph break, please visit: https://meta-pytorch.github.io/compile-graph-break-site/gb/gb0170.html

from user code:
   File "/home/me/models/gate.py", line 7, in forward
    if mask.any():

Set TORCHDYNAMO_VERBOSE=1 for the internal stack trace (please do this especially if you're reporting a bug to PyTorch)."""


class Unsupported(Exception):
    pass


def test_a_graph_break_is_its_kind_explanation_and_the_users_line():
    assert describe_compile_error(Unsupported(GRAPH_BREAK)) == (
        "Unsupported: Data-dependent branching: Detected data-dependent branching (e.g. `if my_tensor.sum() > 0:`). "
        "Dynamo does not support tracing dynamic control flow. (at gate.py:7 `if mask.any():`)")


def test_a_graph_break_leaves_out_hints_and_links():
    said = describe_compile_error(Unsupported(GRAPH_BREAK))
    assert "Hint" not in said and "http" not in said and "TORCHDYNAMO_VERBOSE" not in said


@pytest.mark.parametrize("error", [RuntimeError("CUDA out of\n memory"), ValueError("")])
def test_any_other_error_is_its_type_and_text_on_one_line(error):
    assert describe_compile_error(error) == f"{type(error).__name__}: {' '.join(str(error).split())}"


# torch 2.13's message for nn.GaussianNLLLoss (its `torch.any(var < 0)` check), abridged
GUARD_ON_DATA = """Could not guard on data-dependent expression Eq(u0, 1) (unhinted: Eq(u0, 1)).  (Size-like symbols: none)

Caused by: (_refs/__init__.py:459 in any)
For more information, run with TORCH_LOGS="dynamic"

from user code:
   File "/home/me/models/nll.py", line 6, in forward
    return self.gnll(x, t, var)
  File "/usr/lib/python3.11/site-packages/torch/nn/modules/loss.py", line 459, in forward
    return F.gaussian_nll_loss(
"""


def test_a_branch_on_values_inside_torch_names_the_users_line_and_torchs():
    assert describe_compile_error(Unsupported(GUARD_ON_DATA)) == (
        "Unsupported: the forward branches on tensor values, which one graph cannot hold "
        "(at nll.py:6 `return self.gnll(x, t, var)`; in torch's loss.py:459)")


# torch 2.13's message when an int(tensor) slice size reaches a matmul, abridged: Inductor's
# lowering, with the op's line under "Found from" and no "from user code" block
LOWERING_ON_DATA = """LoweringException: GuardOnDataDependentSymNode: Could not guard on data-dependent expression Max(1, u3) >= u3 (unhinted: Max(1, u3) >= u3).  (Size-like symbols: none)

consider using data-dependent friendly APIs such as guard_or_false, guard_or_true and statically_known_true.
  target: aten.bmm.default
  args[0]: TensorBox(StorageBox(Pointwise('cpu', torch.float32, def inner_fn(index): ...
        File "/home/me/models/kv.py", line 8, in forward,
          K = self.kc[:, :int(self.pos)],
Found from :
   File "/home/me/models/kv.py", line 9, in forward
    return (q @ K.transpose(1, 2)).softmax(-1) @ K
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^


Set TORCHDYNAMO_VERBOSE=1 for the internal stack trace (please do this especially if you're reporting a bug to PyTorch)."""


class InductorError(Exception):
    pass


def test_a_data_dependent_size_in_inductors_lowering_is_named_with_the_users_line():
    assert describe_compile_error(InductorError(LOWERING_ON_DATA)) == (
        "InductorError: the forward reads a tensor's value into a size (`.item()`, `int(t)`: a data-dependent "
        "shape) that an op needs fixed; a seed's sizes are fixed when it is made "
        "(at kv.py:9 `return (q @ K.transpose(1, 2)).softmax(-1) @ K`)")


# torch 2.13's message for `self.alphas[self.t]`, t a 0-dim long buffer, abridged: no line of the user's
INDEX_ON_DATA = """backend='backend' raised:
GuardOnDataDependentSymNode: Could not extract specialized integer from data-dependent expression u0 (unhinted: u0).  (Size-like symbols: none)

Caused by: (_functorch/_aot_autograd/graph_capture_wrappers.py:1534 in functional_call)
For more information, run with TORCH_LOGS="dynamic"
"""


class BackendCompilerFailed(Exception):
    pass


def test_a_data_dependent_number_without_a_line_is_said_plainly_with_the_way_round_it():
    # before: Dynamo's message cut to one line, TORCH_LOGS advice and all
    assert describe_compile_error(BackendCompilerFailed(INDEX_ON_DATA)) == (
        "BackendCompilerFailed: the forward uses a tensor's value as a number (an index or a size: `a[t]` with a "
        "0-dim integer tensor t, `.item()`, `int(t)`), which a seed fixes when it is made; index with a 1-element "
        "tensor (`a[t.view(1)]`) or torch.gather")


# torch 2.13's message for `torch.autograd.grad(E, pos)` in a forward (a force field), abridged
AUTOGRAD_GRAD = """using `torch.autograd.grad` with `torch._dynamo.config.trace_autograd_ops=False`
  Explanation: Attempted to call `torch.autograd.grad` with config `torch._dynamo.config.trace_autograd_ops` set to `False`.
  Hint: Change `torch._dynamo.config.trace_autograd_ops` to `True`.

from user code:
   File "/home/me/models/force.py", line 10, in forward
    (f,) = torch.autograd.grad(E, pos, create_graph=False)
"""


def test_autograd_grad_in_the_forward_names_the_call_and_the_form_that_compiles():
    # before: Dynamo's words, a config setting the user cannot pass through krefine
    assert describe_compile_error(Unsupported(AUTOGRAD_GRAD)) == (
        "Unsupported: the forward calls torch.autograd.grad, which torch.compile does not trace; torch.func.grad "
        "does (at force.py:10 `(f,) = torch.autograd.grad(E, pos, create_graph=False)`)")


def test_any_other_error_is_cut_to_one_line_of_bounded_length():
    from tools.errors import FAULT_CHARS
    said = describe_compile_error(RuntimeError("word " * 2000))
    assert len(said) <= FAULT_CHARS and said.endswith(" …") and "\n" not in said


# torch 2.11's message on cuda for `x * 0.3 + torch.tensor([[1., 0, 0], [0, 1., 0]])`, abridged
TWO_DEVICES = """Dynamo failed to run FX node with fake tensors
  Explanation: Dynamo failed to run FX node with fake tensors: call_function <built-in function add>(*(FakeTensor(..., device='cuda:0', size=(4, 2, 3)), FakeTensor(..., size=(2, 3))), **{}): got RuntimeError('Unhandled FakeTensor Device Propagation for aten.add.Tensor, found two different devices cuda:0, cpu')

from user code:
   File "/home/me/models/affine.py", line 4, in forward
    return x * 0.3 + torch.tensor([[1., 0, 0], [0, 1., 0]])
"""


def test_tensors_on_two_devices_are_named_as_the_models_own_fault_with_its_line():
    said = describe_compile_error(Unsupported(TWO_DEVICES))
    assert said.startswith("Unsupported: the forward mixes tensors on cuda:0 and cpu, as Model itself does there")
    assert said.endswith("hold it as a buffer (at affine.py:4 `return x * 0.3 + torch.tensor([[1., 0, 0], [0, 1., 0]])`)")


# torch 2.13's message for `self.cache[self.n % 4] = k` (a 0-dim tensor computed into an index), abridged
SPECIALIZED_INDEX = """Could not extract specialized integer from data-dependent expression u0 (unhinted: u0).  (Size-like symbols: none)

Caused by: self.cache[self.n % 4] = k  # models/ring.py:7 in forward (_dynamo/utils.py:4231 in run_node)
For more information, run with TORCH_LOGS="dynamic"

from user code:
   File "/home/me/models/ring.py", line 7, in forward
    self.cache[self.n % 4] = k
"""


def test_a_tensor_computed_into_an_index_is_named_as_a_number_not_a_branch():
    # it was "the forward branches on tensor values", of a line with no branch
    assert describe_compile_error(Unsupported(SPECIALIZED_INDEX)) == (
        "Unsupported: the forward uses a tensor's value as a number (an index: `a[t]` with a 0-dim integer tensor t, "
        "`.item()`, `int(t)`), which a seed fixes when it is made; index with a 1-element tensor (`a[t.view(1)]`), "
        "index_copy_ or torch.gather (at ring.py:7 `self.cache[self.n % 4] = k`)")


# torch 2.13's message for `torch.logsumexp(sim[pos_mask], 0)` (a Circle loss), abridged: a size-like symbol
MASKED_SIZE = """Could not guard on data-dependent expression Eq(u0, 0) (unhinted: Eq(u0, 0)).  (Size-like symbols: u0)

Caused by: return torch.logsumexp(x[m], 0)  # models/circle.py:4 in forward (_refs/__init__.py:911 in logsumexp)

from user code:
   File "/home/me/models/circle.py", line 4, in forward
    return torch.logsumexp(x[m], 0)
"""


def test_a_size_set_by_a_boolean_mask_is_named_as_such_not_as_a_branch():
    assert describe_compile_error(Unsupported(MASKED_SIZE)) == (
        "Unsupported: the forward makes a tensor whose size depends on values (x[mask], nonzero, where(cond)), which "
        "a later op needs fixed; a seed's sizes are fixed when it is made: keep the full size and mask it "
        "(torch.where, masked_fill) (at circle.py:4 `return torch.logsumexp(x[m], 0)`)")


# torch 2.13's message for torch.cov(x), abridged
COV = """Data dependent operator
  Explanation: Operator `aten.equal.default` has a non-Tensor output whose value is dependent on the data of Tensor inputs.
  Hint: Consider wrapping the operator into a PyTorch-understood custom operator

from user code:
   File "/home/me/models/cov.py", line 4, in forward
    return torch.cov(x)
"""


def test_torch_cov_is_named_with_the_covariance_written_out():
    # it said only "Operator `aten.equal.default` has a non-Tensor output", an op the user never called
    said = describe_compile_error(Unsupported(COV))
    assert said.startswith("Unsupported: the forward compares tensors into a Python bool (torch.equal; torch.cov and "
                           "torch.corrcoef do it inside torch)") and "xc @ xc.T / (n - 1) (at cov.py:4" in said
