"""tools/judge/reference.py precise_outputs: the reference's forward in float64, the truth
numerics.against_truth measures a float32 reference's own rounding error against."""
from __future__ import annotations

import pytest
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


class _CastsToFloat32(torch.nn.Module):
    """A uint8 image made float, a `.to(torch.float32)` and a float32 constant: float32 by design."""
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(6, 3)

    def forward(self, img, w):
        x = img.float() / 255.0 + torch.full((6,), 0.5, dtype=torch.float32, device=img.device)
        return self.fc(x.to(torch.float32)).double() * w


def test_a_forward_casting_to_float32_has_its_float64_truth():
    # before: the twin's float64 Linear met a float32 input and the forward had no truth ("a dtype mixed")
    torch.manual_seed(0)
    model, img, w = _CastsToFloat32(), torch.randint(0, 256, (4, 6), dtype=torch.uint8), torch.randn(3).double()
    out = precise_outputs(model, [img, w])
    wide = model.fc.weight.double(), model.fc.bias.double()
    want = ((img.double() / 255.0 + 0.5) @ wide[0].T + wide[1]) * w
    assert out is not None and out[0].dtype == torch.float64 and torch.allclose(out[0], want, rtol=1e-12, atol=0)


def test_the_float64_truth_leaves_float32_casts_outside_it_alone():
    _ = precise_outputs(_CastsToFloat32(), [torch.randint(0, 256, (4, 6), dtype=torch.uint8), torch.randn(3).double()])
    assert torch.ones(2).float().dtype == torch.float32 and torch.zeros(1, dtype=torch.float32).dtype == torch.float32


@pytest.mark.slow
def test_the_judge_finds_the_seed_of_float32_work_with_a_float64_output_correct(tmp_path):
    # before: no float64 truth (the forward's `.float()`), and the float64 output held to float64's
    # tolerance against eager's float32 work: "incorrect", 6 of 8 elements past 1e-9
    from tests.test_counters import judged_seed
    verdict = judged_seed("float_cast_double", tmp_path)
    assert verdict["verdict"] == "correct", verdict.get("diagnostics")


@pytest.mark.gpu
def test_on_a_gpu_a_forward_casting_to_float32_has_its_float64_truth():
    torch.manual_seed(0)
    model = _CastsToFloat32().cuda()
    img, w = torch.randint(0, 256, (4, 6), dtype=torch.uint8, device="cuda"), torch.randn(3, device="cuda").double()
    out = precise_outputs(model, [img, w])
    wide = model.fc.weight.double(), model.fc.bias.double()
    want = ((img.double() / 255.0 + 0.5) @ wide[0].T + wide[1]) * w
    assert out is not None and out[0].dtype == torch.float64 and torch.allclose(out[0], want, rtol=1e-12, atol=0)
