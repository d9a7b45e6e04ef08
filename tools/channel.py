"""Framed messages between the judge and a worker, over two pipes.

A frame is MAGIC, the JSON header's length, the payload's length, the header, the
payload (raw tensor bytes). Tensors travel as raw bytes described in the header
(dtype, shape): the judge never unpickles anything a worker sent. Covers framing and
tensor packing only; what the messages mean is tools/worker.py's and
tools/evaluate.py's business. A worker (or candidate code in it) that writes garbage
into the pipe produces a ProtocolError, never a forged value.
"""
from __future__ import annotations

import json
import os
import select
import struct
import time

MAGIC = b"KRF1"
_HEAD = struct.Struct("<4sIQ")
MAX_HEADER = 1 << 20


class ProtocolError(Exception):
    """The peer sent something that is not a frame (or closed mid-frame)."""


class ChannelTimeout(Exception):
    """No complete frame arrived before the deadline."""


def send(fd: int, header: dict, payload: bytes | memoryview = b"") -> None:
    head = json.dumps(header, separators=(",", ":")).encode()
    data = _HEAD.pack(MAGIC, len(head), len(payload)) + head
    _write_all(fd, data)
    if len(payload):
        _write_all(fd, payload)


def recv(fd: int, timeout_s: float | None, max_payload: int = 1 << 36,
         alive=None) -> tuple[dict, bytes]:
    """Read one frame; raise ChannelTimeout past `timeout_s`, ProtocolError on garbage/EOF.

    `alive()` is polled while waiting: when it turns False with no data pending the
    peer is gone (the judge holds its own end of the FIFO open, so no EOF comes)."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    magic, hlen, plen = _HEAD.unpack(_read_exact(fd, _HEAD.size, deadline, alive))
    if magic != MAGIC or hlen > MAX_HEADER or plen > max_payload:
        raise ProtocolError("malformed frame from worker")
    try:
        header = json.loads(_read_exact(fd, hlen, deadline, alive))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ProtocolError(f"malformed frame header: {e}") from None
    if not isinstance(header, dict):
        raise ProtocolError("frame header is not an object")
    return header, _read_exact(fd, plen, deadline, alive)


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while len(view):
        n = os.write(fd, view[: 1 << 24])
        view = view[n:]


def _read_exact(fd: int, n: int, deadline: float | None, alive=None) -> bytes:
    chunks, got = [], 0
    while got < n:
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise ChannelTimeout()
            wait = 0.25 if left is None else min(left, 0.25)
            ready, _, _ = select.select([fd], [], [], wait if alive else left)
            if ready:
                break
            if alive is not None and not alive():
                # one last look: the peer may have written just before it exited
                if select.select([fd], [], [], 0)[0]:
                    break
                raise ProtocolError("worker exited")
        try:
            chunk = os.read(fd, min(n - got, 1 << 24))
        except BlockingIOError:
            continue
        if not chunk:
            raise ProtocolError("worker closed the channel")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


# --- tensors as raw bytes ----------------------------------------------------------

def pack_tensors(tensors) -> tuple[list[dict], bytes]:
    """Describe and concatenate CPU copies of `tensors` (any device, any strides)."""
    import torch
    specs, blobs = [], []
    for t in tensors:
        c = t.detach().to("cpu").contiguous()
        raw = c.view(torch.uint8).reshape(-1).numpy().tobytes() if c.numel() else b""
        specs.append({"dtype": str(c.dtype).removeprefix("torch."), "shape": list(c.shape),
                      "nbytes": len(raw)})
        blobs.append(raw)
    return specs, b"".join(blobs)


def unpack_tensors(specs: list[dict], payload: bytes, device: str = "cpu"):
    """Rebuild plain tensors from pack_tensors' output; raises ProtocolError on mismatch."""
    import torch
    out, offset = [], 0
    for s in specs:
        try:
            dtype = getattr(torch, s["dtype"])
            shape, nbytes = [int(d) for d in s["shape"]], int(s["nbytes"])
        except (KeyError, TypeError, ValueError, AttributeError):
            raise ProtocolError(f"bad tensor spec {s!r}") from None
        if not isinstance(dtype, torch.dtype):
            raise ProtocolError(f"bad dtype {s['dtype']!r}")
        numel = 1
        for d in shape:
            numel *= d
        if nbytes != numel * dtype.itemsize or offset + nbytes > len(payload):
            raise ProtocolError("tensor bytes do not match their spec")
        buf = bytearray(payload[offset:offset + nbytes])
        offset += nbytes
        t = (torch.frombuffer(buf, dtype=torch.uint8).view(dtype).reshape(shape)
             if nbytes else torch.empty(shape, dtype=dtype))
        out.append(t.to(device))
    if offset != len(payload):
        raise ProtocolError("trailing bytes after tensors")
    return out
