"""Timed samples on fresh inputs (tools/perf/rotation.py, the timer's `before_each`): a
forward that remembers inputs it has seen and skips its work on them is timed doing the
work, and the candidate and the baselines are timed alike. The sets and the rotation on a
CPU; the timer and the judge against such a forward on a GPU."""
from __future__ import annotations

import statistics
import textwrap

import pytest
import torch

from tools.perf import rotation
from tools.perf.rotation import Rotation, input_sets, plan


def _make(size=64, extra=3):
    def make(seed: int):
        g = torch.Generator().manual_seed(seed)
        return [torch.randn(size, generator=g), extra]
    return make


def test_a_round_gets_one_set_per_sample():
    make = _make()
    assert plan(make, make(0), 20) == 20


def test_sets_are_new_values_laid_out_as_the_timed_inputs():
    make = _make()
    like = make(0)
    sets = input_sets(make, like, 4)
    values = [s[0] for s in sets]
    assert all(s[1] == 3 and s[0].shape == like[0].shape for s in sets)
    assert all(not a.equal(b) for i, a in enumerate(values) for b in values[i + 1:] + [like[0]])


def test_two_rounds_draw_different_sets():
    make = _make()
    a, b = input_sets(make, make(0), 2), input_sets(make, make(0), 2)
    assert not a[0][0].equal(b[0][0])


def test_the_rotation_writes_each_set_into_the_same_tensor():
    make = _make()
    inputs = make(0)
    x = inputs[0]
    sets = input_sets(make, inputs, 3)
    turn = Rotation(inputs, sets)
    for i in range(4):
        turn(i)
        assert inputs[0] is x and x.equal(sets[i % 3][0]) and inputs[1] == 3
    assert turn.done == 4


def test_inputs_past_the_byte_cap_are_timed_as_they_are(monkeypatch):
    monkeypatch.setattr(rotation, "MAX_BYTES", 64 * 4 * 20 - 1)
    make = _make()
    assert plan(make, make(0), 20) == 0


def test_sets_too_slow_to_make_are_not_made(monkeypatch):
    monkeypatch.setattr(rotation, "MAX_MAKE_S", -1.0)
    make = _make()
    assert plan(make, make(0), 20) == 0


def test_inputs_without_a_tensor_rotate_nothing():
    assert plan(lambda seed: [3, "x"], [3, "x"], 20) == 0


def test_a_set_laid_out_otherwise_stops_the_rotation():
    make = _make()
    assert input_sets(make, [torch.zeros(65), 3], 4) is None     # another shape
    assert input_sets(make, make(0)[:1] + [4], 4) is None         # another non-tensor argument
    assert rotation.rotation(make, [torch.zeros(65), 3], 4) is None


def test_one_sample_a_round_rotates_nothing():
    make = _make()
    assert plan(make, make(0), 1) == 0 and input_sets(make, make(0), 1) is None


def test_fresh_inputs_is_off_by_default_and_can_be_turned_on():
    from tools.settings import TimingSettings
    assert TimingSettings().fresh_inputs is False and TimingSettings(fresh_inputs=True).validate() is None


# --- on a GPU ---------------------------------------------------------------------

MEMO = textwrap.dedent('''
    import torch
    import torch.nn as nn
    import triton
    import triton.language as tl


    @triton.jit
    def memo_kernel(x_ptr, seen_ptr, kept_ptr, out_ptr, n, ROUNDS: tl.constexpr, BLOCK: tl.constexpr):
        # skips its work on a block whose inputs equal the last ones it saw (compared on the device)
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        x = tl.load(x_ptr + offs, mask=m, other=0.0)
        if tl.sum((x != tl.load(seen_ptr + offs, mask=m, other=0.0)).to(tl.int32), 0) > 0:
            acc = x
            for _ in range(ROUNDS):
                acc = tl.sin(acc) * 0.5 + 0.25
            tl.store(kept_ptr + offs, acc, mask=m)
            tl.store(seen_ptr + offs, x, mask=m)
        tl.store(out_ptr + offs, tl.load(kept_ptr + offs, mask=m, other=0.0), mask=m)


    class ModelNew(nn.Module):
        def __init__(self):
            super().__init__()
            self.seen = None

        def forward(self, x):
            if self.seen is None or self.seen.shape != x.shape:
                self.seen = torch.full_like(x, float("nan"))
                self.kept = torch.empty_like(x)
            out = torch.empty_like(x)
            n = x.numel()
            memo_kernel[(triton.cdiv(n, 1024),)](x, self.seen, self.kept, out, n, ROUNDS=2000, BLOCK=1024)
            return out
''')

PROBLEM = textwrap.dedent('''
    import torch
    import torch.nn as nn


    class Model(nn.Module):
        def forward(self, x):
            for _ in range(2000):
                x = torch.sin(x) * 0.5 + 0.25
            return x


    def get_inputs():
        return [torch.randn(1 << 20)]


    def get_init_inputs():
        return []
''')


@pytest.mark.gpu
def test_on_a_gpu_a_forward_that_skips_inputs_it_has_seen_is_timed_doing_its_work(tmp_path):
    import importlib.util
    from tools.perf.timer import time_cuda
    path = tmp_path / "memo.py"   # @triton.jit reads its function's source from a file
    path.write_text(MEMO)
    spec = importlib.util.spec_from_file_location("memo", path)
    memo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(memo)
    make = (lambda seed: [torch.randn(1 << 22, generator=torch.Generator().manual_seed(seed)).cuda()])
    x = make(0)
    model = memo.ModelNew()
    call = lambda: model(x[0])   # noqa: E731
    same = statistics.median(time_cuda(call, warmup=3, iters=10))
    fresh = statistics.median(time_cuda(call, warmup=3, iters=10, before_each=rotation.rotation(make, x, 10)))
    assert fresh > 3 * same


@pytest.mark.gpu
def test_on_a_gpu_the_judge_times_a_remembering_forward_doing_its_work(tmp_path):
    import dataclasses
    from tools.judge import evaluate
    from tools.problem import load_problem
    from tools.settings import EvalSettings
    path = tmp_path / "sines.py"
    path.write_text(PROBLEM)
    problem = load_problem(path)
    base = EvalSettings()   # no torch.compile baseline: Inductor on 6,000 unrolled ops takes minutes
    off = dataclasses.replace(base, timing=dataclasses.replace(base.timing, compile_baseline=False))
    s = dataclasses.replace(off, timing=dataclasses.replace(off.timing, fresh_inputs=True))
    v_on = evaluate(problem, MEMO, device="cuda", settings=s, profile=False)
    v_off = evaluate(problem, MEMO, device="cuda", settings=off, profile=False)
    fresh = v_on.checks["timed_on_fresh_inputs"]
    assert fresh["sets_per_round"] == s.timing.iters_per_round and fresh["candidate_samples"] > 0, fresh
    assert v_on.checks["timing_measure"] == "per_call"   # timed doing its work, it is a long forward
    assert v_on.timing["candidate"].median_ms > 3 * v_off.timing["candidate"].median_ms, (v_on.timing, v_off.timing)
