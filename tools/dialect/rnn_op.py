"""A recurrent module as one op in the capture: `torch.ops.krefine.rnn`.

Traced into the graph (Dynamo's allow_rnn), nn.LSTM / GRU / RNN become every step of every
layer: a 6-layer LSTM over 512 steps is 3,072 cells, which torch.compile did not finish in a
seed's budget. During a capture (tools/dialect/inductor_capture.py `recurrent_as_ops`) each
such module of the problem's model runs as this one op instead, which Inductor leaves as a
call (a fallback) in call(); the converter writes it as krefine's recurrent family
(tools/kernels/rnn.py `rnn_seq`, the same arguments). Here it computes with torch's own
kernels (`torch._VF`), only so the capture runs; its output layout is rnn_seq's.

The module keeps its class's attributes and its parameters' names (the capture's argument
sources name them); only its class is swapped for the capture and swapped back after, for a
subclass of its own class (`isinstance(self.rnn, nn.LSTM)` in a forward takes the branch it
takes in eager, and its methods stay) whose forward is this op's and whose
`flatten_parameters` leaves the weights as they are (the op reads them so).
"""
from __future__ import annotations

import contextlib

import torch

_MODES = {"LSTM": "LSTM", "GRU": "GRU", "RNN": None}   # nn.RNN: RNN_TANH or RNN_RELU by its nonlinearity


@torch.library.custom_op("krefine::rnn", mutates_args=())
def rnn(x: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor, weights: list[torch.Tensor], mode: str,
        num_layers: int, bidirectional: bool, batch_first: bool,
        has_bias: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    seq = x.transpose(0, 1) if batch_first else x
    if mode == "LSTM":
        out, h_n, c_n = torch._VF.lstm(seq, (h0, c0), weights, has_bias, num_layers, 0.0, False, bidirectional, False)
    else:
        fn = {"GRU": torch._VF.gru, "RNN_TANH": torch._VF.rnn_tanh, "RNN_RELU": torch._VF.rnn_relu}[mode]
        out, h_n = fn(seq, h0, weights, has_bias, num_layers, 0.0, False, bidirectional, False)
        c_n = torch.empty(0, device=x.device, dtype=x.dtype)
    out = out.contiguous()
    return (out.transpose(0, 1) if batch_first else out), h_n.clone(), c_n.clone()


@rnn.register_fake
def _(x, h0, c0, weights, mode, num_layers, bidirectional, batch_first, has_bias):
    seq = x.transpose(0, 1) if batch_first else x
    out = seq.new_empty((seq.shape[0], seq.shape[1], (2 if bidirectional else 1) * h0.shape[2]))
    c_n = c0.new_empty(c0.shape) if mode == "LSTM" else x.new_empty((0,))
    return (out.transpose(0, 1) if batch_first else out), h0.new_empty(h0.shape), c_n


class _AsOp(torch.nn.Module):
    """The forward a recurrent module runs with during a capture (its class swapped)."""

    def forward(self, input, hx=None):
        mode = self._krefine_mode
        dirs = 2 if self.bidirectional else 1
        unbatched = input.dim() == 2   # (L, F), h0 (layers, H): a batch of one, as nn.RNN itself runs it
        if unbatched:
            input = input.unsqueeze(0 if self.batch_first else 1)
            hx = None if hx is None else tuple(h.unsqueeze(1) for h in hx) if mode == "LSTM" else hx.unsqueeze(1)
        batch = input.shape[0] if self.batch_first else input.shape[1]
        if hx is None:
            zeros = input.new_zeros((self.num_layers * dirs, batch, self.hidden_size))
            h0, c0 = zeros, zeros
        elif mode == "LSTM":
            h0, c0 = hx
        else:
            h0, c0 = hx, input.new_empty((0,))
        out, h_n, c_n = torch.ops.krefine.rnn(input, h0, c0, list(self._flat_weights), mode, self.num_layers,
                                              self.bidirectional, self.batch_first, self.bias)
        if unbatched:
            out, h_n = out.squeeze(0 if self.batch_first else 1), h_n.squeeze(1)
            c_n = c_n.squeeze(1) if mode == "LSTM" else c_n
        return out, ((h_n, c_n) if mode == "LSTM" else h_n)

    def flatten_parameters(self):
        """Nothing to do: the op reads the weights as they are (cuDNN's flat buffer is eager's concern)."""
        return None


def _mode(module) -> str | None:
    """The op's mode for a module it can stand in for (projections and dropout between
    layers are left to the graph: None; one layer has no dropout; an unbatched input runs as a batch of one)."""
    if type(module) not in (torch.nn.LSTM, torch.nn.GRU, torch.nn.RNN):
        return None
    if getattr(module, "proj_size", 0) or (module.dropout and module.training and module.num_layers > 1):
        return None
    name = type(module).__name__
    return _MODES[name] or ("RNN_RELU" if module.nonlinearity == "relu" else "RNN_TANH")


@contextlib.contextmanager
def recurrent_as_ops(model, epilogues: bool = False):
    """Every nn.LSTM / GRU / RNN of `model` runs as torch.ops.krefine.rnn inside the block, and so
    does a hand-written recurrence (tools/dialect/recurrence.py, a post-grad pass); with
    `epilogues`, a Linear's ReLU goes into its product (tools/dialect/gemm_epilogue.py)."""
    from tools.dialect.recurrence import RecurrencePass
    swapped = []
    for module in model.modules():
        mode = _mode(module)
        if mode is None:
            continue
        if any(p.dtype == torch.float64 for p in module.parameters()):   # its kernels accumulate in fp32
            raise ValueError(f"a float64 {type(module).__name__}: krefine's recurrent family computes in fp32, "
                             "short of the float64 the model asks for")
        cls = type(module)
        module.__class__ = type(cls.__name__, (_AsOp, cls), {"__module__": cls.__module__})
        module._krefine_mode = mode
        swapped.append((module, cls))
    try:
        with torch._inductor.config.patch(post_grad_custom_pre_pass=RecurrencePass(epilogues)):
            yield len(swapped)
    finally:
        for module, cls in swapped:
            module.__class__ = cls
            del module._krefine_mode
