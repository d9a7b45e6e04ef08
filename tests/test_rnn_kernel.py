"""krefine's recurrent family (tools/kernels/rnn.py): nn.LSTM / nn.GRU / nn.RNN as `rnn_seq`, at
each precision a seed's portfolio uses ("ieee" exact fp32 dots; "tf32x3", its tf32x3 variant),
by either path (one persistent launch per layer, the default; two launches per step), against
the module itself in exact fp32 (cuDNN's TF32 off, as the judge's reference runs it). On cuda
the persistent cases have several programs per direction meeting at a barrier every step.

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
def run(cls, precision, layers=2, bidirectional=True, batch_first=True, bias=True, persistent=None,
        batch=3, steps=9, hidden=20, **kw):
    torch.manual_seed(0)
    m = cls(12, hidden, num_layers=layers, bidirectional=bidirectional, batch_first=batch_first, bias=bias,
            **kw).to(dev).eval()
    mode = MODES.get(cls) or ("RNN_RELU" if kw.get("nonlinearity") == "relu" else "RNN_TANH")
    dirs = 2 if bidirectional else 1
    x = torch.randn(batch, steps, 12, device=dev) if batch_first else torch.randn(steps, batch, 12, device=dev)
    h0 = torch.randn(layers * dirs, batch, hidden, device=dev)
    c0 = torch.randn(layers * dirs, batch, hidden, device=dev)
    with torch.no_grad():
        want = m(x, (h0, c0)) if mode == "LSTM" else m(x, h0)
        got = rnn_seq(x, h0, c0 if mode == "LSTM" else h0, m._flat_weights, mode, layers, bidirectional,
                      batch_first, bias, precision=precision, persistent=persistent)
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
    out[f"lstm_per_step_{p}"] = run(torch.nn.LSTM, p, persistent=False)
    out[f"gru_per_step_{p}"] = run(torch.nn.GRU, p, persistent=False)
    out[f"rnn_tanh_per_step_{p}"] = run(torch.nn.RNN, p, layers=1, persistent=False)
out["gru_without_bias_ieee"] = run(torch.nn.GRU, "ieee", bias=False)
out["lstm_without_bias_ieee"] = run(torch.nn.LSTM, "ieee", layers=1, bias=False)
# two batch tiles of 64 rows; on cuda, 16 programs per tile and direction over 200 steps
out["lstm_wide_two_batch_tiles_ieee"] = run(torch.nn.LSTM, "ieee", layers=1, batch=70, hidden=40)
out["gru_long_many_programs_ieee"] = run(torch.nn.GRU, "ieee", layers=2, batch=10, hidden=256,
                                         steps=200 if dev == "cuda" else 12)
# W_hh rows longer than one block of 64: several products per gate and step
out["lstm_wide_hidden_streamed_weights_ieee"] = run(torch.nn.LSTM, "ieee", layers=1, bidirectional=False, hidden=600,
                                                    steps=40 if dev == "cuda" else 3)
# biases read through a step (a column of a table), h0 and c0 with hidden units of stride 2: read as laid out
def strided(cls, persistent):
    torch.manual_seed(0)
    m = cls(12, 20, num_layers=2, bidirectional=True, batch_first=True).to(dev).eval()
    mode = MODES[cls]
    ws = [w if w.dim() == 2 else torch.stack([w, torch.zeros_like(w)], 1)[:, 0] for w in m._flat_weights]
    x, h0, c0 = torch.randn(3, 9, 12, device=dev), torch.randn(4, 3, 40, device=dev)[..., ::2], \
        torch.randn(4, 3, 40, device=dev)[..., ::2]
    with torch.no_grad():
        # the module reads contiguous copies (cuDNN refuses a strided hx); the family reads the strided ones
        hc, cc = h0.contiguous(), c0.contiguous()
        want = m(x, (hc, cc))[0] if mode == "LSTM" else m(x, hc)[0]
        got = rnn_seq(x, h0, c0 if mode == "LSTM" else h0, ws, mode, 2, True, True, True, persistent=persistent)[0]
    return (got - want).abs().max().item()
for cls in (torch.nn.LSTM, torch.nn.GRU):
    for persistent in (None, False):
        name = f"strided_state_and_bias_{MODES[cls].lower()}_{'persistent' if persistent is None else 'per_step'}"
        out[name + "_ieee"] = strided(cls, persistent)
from tools.kernels.rnn import rnn_linear
xl, wl, bl = torch.randn(37, 29, device=dev), torch.randn(23, 29, device=dev), torch.randn(1, device=dev).expand(23)
out["linear_expanded_bias_ieee"] = (rnn_linear(xl, wl, bl, torch.empty(37, 23, device=dev)) -
                                    torch.addmm(bl, xl, wl.t())).abs().max().item()
# half weights and inputs against the fp32 module with the same (rounded) weights
def half(persistent):
    torch.manual_seed(0)
    m = torch.nn.LSTM(12, 20, 2, batch_first=True, bidirectional=True).to(dev).half()
    ref = torch.nn.LSTM(12, 20, 2, batch_first=True, bidirectional=True).to(dev)
    ref.load_state_dict({k: v.float() for k, v in m.state_dict().items()})
    x, h0, c0 = torch.randn(3, 9, 12, device=dev).half(), torch.randn(4, 3, 20, device=dev).half(), \
        torch.randn(4, 3, 20, device=dev).half()
    with torch.no_grad():
        want = ref(x.float(), (h0.float(), c0.float()))[0]
        got = rnn_seq(x, h0, c0, m._flat_weights, "LSTM", 2, True, True, True, persistent=persistent)[0]
    return (got.float() - want).abs().max().item()
out["half_lstm_persistent"] = half(None)
out["half_lstm_per_step"] = half(False)
print(json.dumps(out))
"""
NAMES = [f"{case}_{p}" for p in ("ieee", "tf32x3")
         for case in ("lstm_two_layers_bidirectional", "gru_two_layers_bidirectional", "rnn_tanh_sequence_first",
                      "rnn_relu_without_bias", "lstm_per_step", "gru_per_step", "rnn_tanh_per_step")] + \
    ["lstm_wide_two_batch_tiles_ieee", "gru_long_many_programs_ieee", "lstm_wide_hidden_streamed_weights_ieee",
     "gru_without_bias_ieee", "lstm_without_bias_ieee", "linear_expanded_bias_ieee"] + \
    [f"strided_state_and_bias_{m}_{p}_ieee" for m in ("lstm", "gru") for p in ("persistent", "per_step")]
TOLERANCE = 1e-4   # the seed tests' bound against the model in exact fp32


@pytest.mark.parametrize("case", NAMES)
def test_the_recurrent_family_matches_the_module_in_the_interpreter(case):
    assert case_errors(CASES, "cpu")[case] < TOLERANCE


@pytest.mark.parametrize("case", ["half_lstm_persistent", "half_lstm_per_step"])
def test_half_inputs_and_weights_run_on_either_path_within_half_precision(case):
    assert case_errors(CASES, "cpu")[case] < 2e-3


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["half_lstm_persistent", "half_lstm_per_step"])
def test_half_inputs_and_weights_run_on_either_path_on_cuda(case):
    assert case_errors(CASES, "cuda")[case] < 2e-3


@pytest.mark.gpu
@pytest.mark.parametrize("case", NAMES)
def test_the_recurrent_family_matches_the_module_on_cuda(case):
    assert case_errors(CASES, "cuda")[case] < TOLERANCE


def _sms(monkeypatch, count):
    """a GPU of `count` SMs, as torch.cuda.get_device_properties describes it"""
    import types
    import torch
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: types.SimpleNamespace(
        multi_processor_count=count))


def test_a_persistent_layer_spreads_its_hidden_units_over_programs_that_all_fit_on_the_gpu(monkeypatch):
    import torch
    from tools.kernels import rnn
    gpu = torch.device("cuda", 0)
    _sms(monkeypatch, 8)
    assert rnn.persistent_plan(gpu, 10, 256, 2) == (16, 64, 1, 4)       # 2 directions x 4 programs <= 8 SMs
    assert rnn.persistent_plan(gpu, 100, 40, 1) == (64, 16, 2, 3)       # 2 batch tiles x 3 programs


def test_tensor_core_products_give_each_program_twice_the_hidden_units(monkeypatch):
    import torch
    from tools.kernels import rnn
    gpu = torch.device("cuda", 0)
    _sms(monkeypatch, 132)
    assert rnn.persistent_plan(gpu, 10, 256, 1, "ieee") == (16, 16, 1, 16)
    assert rnn.persistent_plan(gpu, 10, 256, 1, "tf32x3") == (16, 32, 1, 8)


def test_a_layer_too_wide_for_the_gpu_has_no_persistent_plan(monkeypatch):
    import torch
    from tools.kernels import rnn
    gpu = torch.device("cuda", 0)
    _sms(monkeypatch, 8)
    assert rnn.persistent_plan(gpu, 10, 2048, 2) is None                # 2 x 16 programs of 128 units > 8


def test_under_mps_only_the_process_s_share_of_the_sms_counts(monkeypatch):
    import torch
    from tools.kernels import rnn
    _sms(monkeypatch, 132)
    monkeypatch.setenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "20")      # 26 SMs: 2 x 16 programs do not fit
    assert rnn.persistent_plan(torch.device("cuda", 0), 10, 256, 2) == (16, 32, 1, 8)


def test_the_interpreter_runs_one_program_per_batch_tile_and_direction():
    import torch
    from tools.kernels import rnn
    assert rnn.persistent_plan(torch.device("cpu"), 10, 300, 2) == (16, 512, 1, 1)


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
def test_the_persistent_kernel_compiles_for_sm90_with_a_release_arrive_and_an_acquire_poll(mode):
    from tests.kernel_cases import compile_for_sm90
    from tools.kernels import rnn
    fn = rnn.rnn_persistent_kernel
    consts = dict(MODE=mode, HAS_BIAS=True, SYNC=True, NJ=16, PRECISION="ieee", BB=16, BJ=16, BK=64)
    sig = {n: "constexpr" if n in consts else ("*i32" if n == "bar_ptr" else "*fp32") if n.endswith("_ptr")
           else "i32" for n in getattr(fn, "arg_names", [])}
    ptx = compile_for_sm90(fn, sig, consts).asm["ptx"]
    # one thread per program arrives (a release add) and polls (an acquire load) at gpu scope
    assert "red.global.gpu.release.add" in ptx and "ld.global.gpu.acquire" in ptx
