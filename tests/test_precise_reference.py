"""tools/judge/reference.py precise_outputs: the reference's forward in float64, the truth
numerics.against_truth measures a float32 reference's own rounding error against."""
from __future__ import annotations

import torch

from tools.judge.reference import precise_outputs


class _Norm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = torch.nn.BatchNorm1d(8)

    def forward(self, x):
        return self.bn(x).mean(dim=1)


class _MixesDtypes(torch.nn.Module):
    def forward(self, x):
        return x @ torch.ones(x.shape[1], 3)      # a float32 tensor made inside the forward


def test_precise_outputs_are_float64():
    out = precise_outputs(_Norm(), [torch.rand(4, 8)])
    assert out is not None and [o.dtype for o in out] == [torch.float64]


def test_precise_outputs_leave_the_callers_model_as_it_was():
    model = _Norm()                                # training mode: BatchNorm updates running stats
    precise_outputs(model, [torch.rand(4, 8) + 3])
    assert model.bn.weight.dtype == torch.float32 and torch.equal(model.bn.running_mean, torch.zeros(8))


def test_a_forward_that_cannot_run_in_float64_gives_no_truth():
    assert precise_outputs(_MixesDtypes(), [torch.rand(2, 4)]) is None


class _ValuesAndIndices(torch.nn.Module):
    def forward(self, x):
        return x.softmax(-1), x.argmax(-1)


def test_an_index_output_beside_values_leaves_the_values_their_truth():
    """(values, argmax): the float64 forward is the truth of the values; the index output has
    none (nothing rounded there). Before, the index output took the truth from both."""
    out = precise_outputs(_ValuesAndIndices(), [torch.rand(3, 7)])
    assert out is not None and out[0].dtype == torch.float64 and out[1] is None


def test_a_forward_with_no_floating_output_gives_no_truth():
    class _Indices(torch.nn.Module):
        def forward(self, x):
            return x.argmax(-1)
    assert precise_outputs(_Indices(), [torch.rand(3, 7)]) is None
