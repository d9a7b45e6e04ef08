"""The judge/worker framing: values round-trip, garbage never becomes a value."""
from __future__ import annotations

import os

import pytest
import torch

from tools import channel


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
