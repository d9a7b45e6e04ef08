"""Framed messages between the judge and a worker, over two pipes.

A frame is MAGIC, the JSON header's length, the payload's length, the header, the
payload (raw tensor bytes). Tensors travel as raw bytes described in the header
(dtype, shape): the judge never unpickles anything a worker sent. Covers framing and
tensor packing only; what the messages mean is tools/sandbox/worker.py's and
tools/judge/'s business. A worker (or candidate code in it) that writes garbage
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


def send(fd: int, header: dict, payload=b"") -> None:
    """`payload` is bytes or a list of buffers (written in order, never joined)."""
    parts = payload if isinstance(payload, list) else [payload]
    views = [memoryview(p).cast("B") for p in parts]
    head = json.dumps(header, separators=(",", ":")).encode()
    _write_all(fd, _HEAD.pack(MAGIC, len(head), sum(v.nbytes for v in views)) + head)
    for v in views:
        if v.nbytes:
            _write_all(fd, v)


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
    return header, _read_into(fd, plen, deadline, alive)


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while len(view):
        n = os.write(fd, view[: 1 << 24])
        view = view[n:]


def _read_exact(fd: int, n: int, deadline: float | None, alive=None) -> bytes:
    return bytes(_read_into(fd, n, deadline, alive))


def _read_into(fd: int, n: int, deadline: float | None, alive=None) -> bytearray:
    """Read exactly n bytes into one preallocated buffer (no joins of GB payloads)."""
    buf = bytearray(n)
    view, got = memoryview(buf), 0
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
            k = os.readv(fd, [view[got:min(n, got + (1 << 24))]])
        except BlockingIOError:
            continue
        if not k:
            raise ProtocolError("worker closed the channel")
        got += k
    return buf


# --- tensors as raw bytes ----------------------------------------------------------

def pack_tensors(tensors) -> tuple[list[dict], list]:
    """Describe `tensors` (exact torch.Tensors, any device, any strides) and return CPU byte
    views of them, ready for send(); no intermediate bytes objects. Through TensorBase's
    functions, never a method the tensor object offers (tools/sandbox/outputs.py)."""
    import torch
    B = torch._C.TensorBase
    specs, views = [], []
    for t in tensors:
        c = B.contiguous(B.to(B.detach(t), "cpu"))
        # flat before the byte view: a 0-dim tensor (a loss) has no dimension to widen
        raw = B.numpy(B.view(B.reshape(c, (-1,)), torch.uint8)) if B.numel(c) else b""
        specs.append({"dtype": str(B.dtype.__get__(c)).removeprefix("torch."), "shape": list(B.shape.__get__(c)),
                      "nbytes": len(raw)})
        views.append(raw)
    return specs, views


def unpack_tensors(specs: list[dict], payload, device: str = "cpu", staged=None):
    """Rebuild plain tensors from pack_tensors' output; raises ProtocolError on mismatch.

    A spec with "staged": OFFSET came through `staged`, the judge's own CUDA IPC buffer
    (tools/sandbox/cudaipc.py): its bytes are copied out of that buffer, after checking
    that they lie inside it."""
    import torch
    if isinstance(payload, list):
        payload = bytearray(b"".join(bytes(memoryview(v).cast("B")) for v in payload))
    elif not isinstance(payload, bytearray):
        payload = bytearray(payload)  # frombuffer wants a writable buffer
    out, offset = [], 0
    for s in specs:
        try:
            dtype = getattr(torch, s["dtype"])
            shape, nbytes = [int(d) for d in s["shape"]], int(s["nbytes"])
        except (KeyError, TypeError, ValueError, AttributeError):
            raise ProtocolError(f"bad tensor spec {s!r}") from None
        if not isinstance(dtype, torch.dtype):
            raise ProtocolError(f"bad dtype {s['dtype']!r}")
        if any(d < 0 for d in shape):
            raise ProtocolError(f"negative dimension in shape {shape}")
        numel = 1
        for d in shape:
            numel *= d
        if nbytes != numel * dtype.itemsize:
            raise ProtocolError("tensor bytes do not match their spec")
        if "staged" in s:
            out.append(_from_staging(s["staged"], nbytes, dtype, shape, staged).to(device))
            continue
        if offset + nbytes > len(payload):
            raise ProtocolError("tensor bytes do not match their spec")
        t = (torch.frombuffer(payload, dtype=torch.uint8, count=nbytes, offset=offset)
             .view(dtype).reshape(shape) if nbytes else torch.empty(shape, dtype=dtype))
        offset += nbytes
        out.append(t.to(device))
    if offset != len(payload):
        raise ProtocolError("trailing bytes after tensors")
    return out


def _from_staging(at, nbytes: int, dtype, shape: list[int], staged):
    """A judge-owned copy of `nbytes` at offset `at` of the staging buffer."""
    import torch
    from tools.sandbox.cudaipc import ALIGN
    if staged is None:
        raise ProtocolError("a staged tensor, but no staging buffer was offered")
    if type(at) is not int or at < 0 or at % ALIGN or at + nbytes > staged.numel():
        raise ProtocolError(f"staged tensor at {at!r} (+{nbytes} bytes) lies outside the "
                            f"{staged.numel()}-byte staging buffer")
    if not nbytes:
        return torch.empty(shape, dtype=dtype, device=staged.device)
    return staged[at:at + nbytes].view(dtype).reshape(shape).clone()
