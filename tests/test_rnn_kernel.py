"""krefine's recurrent family (tools/kernels/rnn.py): nn.LSTM / nn.GRU / nn.RNN as `rnn_seq`, at
each precision a seed's portfolio uses ("ieee" exact fp32 dots; "tf32x3", its tf32x3 variant),
against the module itself in exact fp32 (cuDNN's TF32 off, as the judge's reference runs it).

On cpu the cases run in Triton's interpreter in one child process; each case is its own test.
The `gpu` tests run the same cases on cuda, where tf32x3 is three TF32 products on tensor cores.
"""
from __future__ import annotations

import pytest

from tests.kernel_cases import case_errors

CASES = """
import json, sys
import torch
from tools.kernels.rnn import rnn_seq
dev = sys.argv[1]
torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_tf32 = False
MODES = {torch.nn.LSTM: "LSTM", torch.nn.GRU: "GRU"}
def run(cls, precision, layers=2, bidirectional=True, batch_first=True, bias=True, **kw):
    torch.manual_seed(0)
    m = cls(12, 20, num_layers=layers, bidirectional=bidirectional, batch_first=batch_first, bias=bias,
            **kw).to(dev).eval()
    mode = MODES.get(cls) or ("RNN_RELU" if kw.get("nonlinearity") == "relu" else "RNN_TANH")
    dirs = 2 if bidirectional else 1
    x = torch.randn(3, 9, 12, device=dev) if batch_first else torch.randn(9, 3, 12, device=dev)
    h0 = torch.randn(layers * dirs, 3, 20, device=dev)
    c0 = torch.randn(layers * dirs, 3, 20, device=dev)
    with torch.no_grad():
        want = m(x, (h0, c0)) if mode == "LSTM" else m(x, h0)
        got = rnn_seq(x, h0, c0 if mode == "LSTM" else h0, m._flat_weights, mode, layers, bidirectional,
                      batch_first, bias, precision=precision)
    out, state = want
    pairs = [(got[0], out)] + ([(got[1], state[0]), (got[2], state[1])] if mode == "LSTM" else [(got[1], state)])
    return max((g - w).abs().max().item() if g.shape == w.shape else float("inf") for g, w in pairs)
out = {}
for p in ("ieee", "tf32x3"):
    out[f"lstm_two_layers_bidirectional_{p}"] = run(torch.nn.LSTM, p)
    out[f"gru_two_layers_bidirectional_{p}"] = run(torch.nn.GRU, p)
    out[f"rnn_tanh_sequence_first_{p}"] = run(torch.nn.RNN, p, layers=1, bidirectional=False, batch_first=False)
    out[f"rnn_relu_without_bias_{p}"] = run(torch.nn.RNN, p, layers=3, bidirectional=False, bias=False,
                                            nonlinearity="relu")
print(json.dumps(out))
"""
NAMES = [f"{case}_{p}" for p in ("ieee", "tf32x3")
         for case in ("lstm_two_layers_bidirectional", "gru_two_layers_bidirectional", "rnn_tanh_sequence_first",
                      "rnn_relu_without_bias")]
TOLERANCE = 1e-4   # the seed tests' bound against the model in exact fp32


@pytest.mark.parametrize("case", NAMES)
def test_the_recurrent_family_matches_the_module_in_the_interpreter(case):
    assert case_errors(CASES, "cpu")[case] < TOLERANCE


@pytest.mark.gpu
@pytest.mark.parametrize("case", NAMES)
def test_the_recurrent_family_matches_the_module_on_cuda(case):
    assert case_errors(CASES, "cuda")[case] < TOLERANCE
