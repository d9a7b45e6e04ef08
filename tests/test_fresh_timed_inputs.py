"""Timed samples on fresh inputs (tools/sandbox/measure_ops.py `_refresher`, the timer's
`before_each`): a forward that remembers inputs it has seen and skips its work on them is
timed doing the work. The refresher on a CPU; the timer against such a forward on a GPU."""
from __future__ import annotations

import statistics

import pytest

from tools.sandbox import measure_ops
from tools.sandbox.measure_ops import MeasureOps


class _Ops(MeasureOps):
    """MeasureOps with the worker's input maker: a seed's tensors (and a fixed int)."""

    def __init__(self, extra=3, size=64):
        self.extra, self.size = extra, size

    def _inputs(self, seed: int):
        import torch
        g = torch.Generator().manual_seed(seed)
        return [torch.randn(self.size, generator=g), self.extra]


def test_each_sample_gets_new_values_in_the_same_tensor():
    ops = _Ops()
    inputs = ops._inputs(1)
    x, first = inputs[0], inputs[0].clone()
    refresh = ops._refresher(inputs)
    refresh(0)
    after_one = x.clone()
    refresh(1)
    assert inputs[0] is x and not x.equal(first) and not x.equal(after_one) and refresh.done == 2


def test_no_set_of_inputs_comes_back_in_a_later_round():
    ops = _Ops()
    a, b = ops._inputs(1), ops._inputs(1)
    ops._refresher(a)(0)
    ops._refresher(b)(0)     # the next round's first sample: a set of its own, not the last round's
    assert not a[0].equal(b[0])


def test_inputs_past_the_byte_cap_are_not_refreshed(monkeypatch):
    monkeypatch.setattr(measure_ops, "REFRESH_MAX_BYTES", 64 * 4 - 1)
    assert _Ops()._refresher(_Ops()._inputs(1)) is None


def test_inputs_without_a_tensor_are_not_refreshed():
    assert _Ops()._refresher([3, "x"]) is None


def test_a_refill_past_the_time_cap_is_the_last(monkeypatch):
    monkeypatch.setattr(measure_ops, "REFRESH_MAX_S", -1.0)
    ops = _Ops()
    inputs = ops._inputs(1)
    refresh = ops._refresher(inputs)
    refresh(0)
    kept = inputs[0].clone()
    refresh(1)
    assert refresh.done == 1 and inputs[0].equal(kept)


def test_inputs_that_cannot_be_written_stop_the_refresh():
    ops = _Ops()
    inputs = ops._inputs(1)
    inputs[1] = 4            # the worker's inputs differ from a fresh set's: nothing is written
    kept = inputs[0].clone()
    refresh = ops._refresher(inputs)
    refresh(0)
    assert refresh.done == 0 and inputs[0].equal(kept)


# --- on a GPU ---------------------------------------------------------------------

@pytest.mark.gpu
def test_a_forward_that_skips_inputs_it_has_seen_is_timed_doing_its_work():
    import torch
    import triton
    import triton.language as tl
    from tools.perf.timer import time_cuda

    @triton.jit
    def memo(x_ptr, seen_ptr, out_ptr, n, ROUNDS: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        x = tl.load(x_ptr + offs, mask=m, other=0.0)
        if tl.sum((x != tl.load(seen_ptr + offs, mask=m, other=0.0)).to(tl.int32), 0) > 0:
            acc = x
            for _ in range(ROUNDS):
                acc = tl.sin(acc) * 0.999 + 0.5
            tl.store(out_ptr + offs, acc, mask=m)
            tl.store(seen_ptr + offs, x, mask=m)

    n = 1 << 22
    x, seen, out = torch.randn(n, device="cuda"), torch.zeros(n, device="cuda"), torch.empty(n, device="cuda")
    call = lambda: memo[(n // 1024,)](x, seen, out, n, ROUNDS=2000, BLOCK=1024)   # noqa: E731
    same = statistics.median(time_cuda(call, warmup=3, iters=10))
    fresh = statistics.median(time_cuda(call, warmup=3, iters=10, before_each=lambda i: x.normal_()))
    assert fresh > 3 * same
