"""The judge/worker framing: values round-trip, garbage never becomes a value."""
from __future__ import annotations

import os

import pytest
import torch

from tools.sandbox import channel


def pipe_roundtrip(header, payload=b""):
    r, w = os.pipe()
    try:
        channel.send(w, header, payload)
        return channel.recv(r, timeout_s=5)
    finally:
        os.close(r)
        os.close(w)


def test_header_and_payload_round_trip():
    assert pipe_roundtrip({"op": "x", "n": 3}, b"abc") == ({"op": "x", "n": 3}, b"abc")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool])
def test_tensors_round_trip_bit_exact(dtype):
    t = (torch.randn(3, 5) * 10).to(dtype)
    specs, raw = channel.pack_tensors([t, t.t()])
    a, b = channel.unpack_tensors(specs, raw)
    assert a.dtype == dtype and torch.equal(a, t) and torch.equal(b, t.t())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64])
def test_a_0_dim_tensor_a_loss_returns_round_trips(dtype):
    t = torch.tensor(3.25).to(dtype)
    specs, raw = channel.pack_tensors([t])
    (a,) = channel.unpack_tensors(specs, raw)
    assert a.shape == () and a.dtype == dtype and torch.equal(a, t)


def test_garbage_bytes_are_a_protocol_error():
    r, w = os.pipe()
    os.write(w, b'{"verdict": "correct"}\n' * 4)
    with pytest.raises(channel.ProtocolError):
        channel.recv(r, timeout_s=5)
    os.close(r), os.close(w)


def test_silence_is_a_timeout():
    r, w = os.pipe()
    with pytest.raises(channel.ChannelTimeout):
        channel.recv(r, timeout_s=0.2)
    os.close(r), os.close(w)


def test_dead_peer_is_a_protocol_error_not_a_hang():
    r, w = os.pipe()
    with pytest.raises(channel.ProtocolError):
        channel.recv(r, timeout_s=5, alive=lambda: False)
    os.close(r), os.close(w)


def test_tensor_spec_larger_than_payload_is_rejected():
    specs, raw = channel.pack_tensors([torch.ones(4)])
    specs[0]["shape"] = [400]
    with pytest.raises(channel.ProtocolError):
        channel.unpack_tensors(specs, raw)


def test_non_dtype_name_is_rejected():
    with pytest.raises(channel.ProtocolError):
        channel.unpack_tensors([{"dtype": "nn", "shape": [1], "nbytes": 4}], b"\0" * 4)


# --- outputs through a staging buffer (tools/sandbox/cudaipc.py; a CPU tensor stands in) ---

def _buffer(n=4096):
    return torch.zeros(n, dtype=torch.uint8)


def test_staged_tensors_round_trip_bit_exact():
    from tools.sandbox import cudaipc
    buf = _buffer()
    outs = [torch.randn(3, 5), torch.arange(7, dtype=torch.int64), torch.randn(4).t(), torch.empty(0)]
    specs = cudaipc.stage(outs, buf)
    got = channel.unpack_tensors(specs, b"", staged=buf)
    assert all(torch.equal(g, o) and g.dtype == o.dtype for g, o in zip(got, outs))


def test_staged_copy_is_the_judges_own():
    from tools.sandbox import cudaipc
    buf = _buffer()
    specs = cudaipc.stage([torch.ones(8)], buf)
    got = channel.unpack_tensors(specs, b"", staged=buf)[0]
    buf.fill_(0)  # the worker writing the buffer afterwards
    assert torch.equal(got, torch.ones(8))


def test_outputs_that_do_not_fit_are_not_staged():
    from tools.sandbox import cudaipc
    assert cudaipc.stage([torch.ones(2000)], _buffer(4096)) is None


@pytest.mark.parametrize("at", [4096, 4000, -256, 128, True, "0", 1.0])
def test_staged_offset_outside_or_misaligned_is_rejected(at):
    with pytest.raises(channel.ProtocolError):
        channel.unpack_tensors([{"dtype": "float32", "shape": [64], "nbytes": 256, "staged": at}],
                               b"", staged=_buffer())


def test_staged_spec_without_a_buffer_is_rejected():
    with pytest.raises(channel.ProtocolError):
        channel.unpack_tensors([{"dtype": "float32", "shape": [4], "nbytes": 16, "staged": 0}], b"")


def test_negative_dimension_is_rejected():
    with pytest.raises(channel.ProtocolError):
        channel.unpack_tensors([{"dtype": "float32", "shape": [-1, -1], "nbytes": 4}], b"\0" * 4)


def test_staging_layout_aligns_every_tensor():
    from tools.sandbox import cudaipc
    assert cudaipc.layout([1, 256, 257, 0, 5]) == [0, 256, 512, 1024, 1024]
    assert cudaipc.span([1, 256, 257, 0, 5]) == 1280


LOSS_PROBLEM = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return (x * x).mean()

def get_inputs():
    return [torch.randn(100)]

def get_init_inputs():
    return []
'''

LOSS_CANDIDATE = '''import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def mean_square_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr, tl.sum(x * x, axis=0) / n)

class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty((), device=x.device, dtype=x.dtype)
        mean_square_kernel[(1,)](x, out, x.numel(), BLOCK=128)
        return out
'''


@pytest.mark.slow   # a judge session of its own; the pack/unpack round trip above is the fast check
def test_a_candidate_returning_a_0_dim_loss_is_judged_correct_on_cpu(tmp_path):
    from shared_judges import verdict_of
    from tools.problem import load_problem
    from tools.verdict import Status
    path = tmp_path / "mean_square.py"
    path.write_text(LOSS_PROBLEM)
    verdict = verdict_of(load_problem(path), LOSS_CANDIDATE, device="cpu")
    assert verdict.status is Status.CORRECT, verdict.diagnostics
