"""The timer's measures (tools/perf/timer.py): the choice of measure and the reps arithmetic
on CPU; per-call, batched and CUDA-graph timing on a GPU (marked gpu)."""
from __future__ import annotations

import math
import statistics

import pytest

from tools.perf.timer import (MAX_REPS, PER_CALL_MIN_MS, REPLAY_TARGET_MS, choose_measure,
                              reps_for)


def test_per_call_is_kept_at_the_threshold():
    assert choose_measure(PER_CALL_MIN_MS, graph_ok=True) == "per_call"


def test_per_call_is_kept_above_the_threshold_without_capture():
    assert choose_measure(5.0, graph_ok=False) == "per_call"


def test_graph_replay_is_chosen_below_the_threshold_when_capture_works():
    assert choose_measure(0.012, graph_ok=True) == "cuda_graph"


def test_batched_is_chosen_below_the_threshold_when_capture_fails():
    assert choose_measure(0.012, graph_ok=False) == "batched"


def test_the_threshold_can_be_moved():
    assert choose_measure(0.5, graph_ok=True, per_call_min_ms=1.0) == "cuda_graph"


@pytest.mark.parametrize("call_ms", [0.003, 0.0123, 0.05, 0.3, 0.999])
def test_reps_are_the_fewest_that_make_one_replay_last_the_target(call_ms):
    reps = reps_for(call_ms)
    assert reps * call_ms >= REPLAY_TARGET_MS > (reps - 1) * call_ms


def test_reps_are_one_for_calls_longer_than_the_target():
    assert reps_for(3 * REPLAY_TARGET_MS) == 1


@pytest.mark.parametrize("call_ms", [0.0, -1.0, math.nan, 1e-9])
def test_reps_are_capped_for_calls_too_short_to_see(call_ms):
    assert reps_for(call_ms) == MAX_REPS


# --- on a GPU ---------------------------------------------------------------------

@pytest.fixture
def tiny_add():
    import torch
    x = torch.randn(1 << 16, device="cuda")
    return lambda: x + 1


@pytest.mark.gpu
def test_graph_replay_per_call_time_is_below_per_call_time_for_a_tiny_add(tiny_add):
    from tools.perf.timer import estimate_call_ms, time_cuda, time_cuda_graph
    per_call = statistics.median(time_cuda(tiny_add, warmup=5, iters=20))
    reps = reps_for(estimate_call_ms(tiny_add, calls=20))
    graph = statistics.median(time_cuda_graph(tiny_add, warmup=5, iters=20, reps_per_graph=reps))
    assert graph < per_call


@pytest.mark.gpu
def test_batched_per_call_time_is_below_per_call_time_for_a_tiny_add(tiny_add):
    from tools.perf.timer import time_cuda, time_cuda_batched
    per_call = statistics.median(time_cuda(tiny_add, warmup=5, iters=20))
    batched = statistics.median(time_cuda_batched(tiny_add, warmup=5, iters=20, calls_per_sample=100))
    assert batched < per_call


@pytest.mark.gpu
def test_batched_timer_counts_work_left_on_a_side_stream():
    import torch
    from tools.perf.timer import time_cuda_batched
    a = torch.randn(4096, 4096, device="cuda")
    side = torch.cuda.Stream()

    def on_main():
        a @ a

    def on_side():
        with torch.cuda.stream(side):
            a @ a
    main_ms = min(time_cuda_batched(on_main, warmup=3, iters=5, calls_per_sample=5))
    side_ms = min(time_cuda_batched(on_side, warmup=3, iters=5, calls_per_sample=5))
    assert side_ms > 0.5 * main_ms


def _syncing(x):
    import torch

    def fn():
        y = x + 1
        torch.cuda.synchronize()
        return y
    return fn


@pytest.mark.gpu
def test_a_forward_that_synchronizes_cannot_be_graph_timed():
    import torch
    from tools.perf.timer import CaptureUnsupported, time_cuda_graph
    fn = _syncing(torch.randn(1024, device="cuda"))
    with pytest.raises(CaptureUnsupported):
        time_cuda_graph(fn, warmup=2, iters=3, reps_per_graph=4)


@pytest.mark.gpu
def test_a_forward_that_reads_a_value_on_the_host_cannot_be_graph_timed():
    import torch
    from tools.perf.timer import CaptureUnsupported, time_cuda_graph
    x = torch.randn(1024, device="cuda")
    with pytest.raises(CaptureUnsupported):
        time_cuda_graph(lambda: x * x.sum().item(), warmup=2, iters=3, reps_per_graph=4)


@pytest.mark.gpu
def test_a_forward_whose_work_all_runs_on_an_unjoined_stream_cannot_be_graph_timed():
    import torch
    from tools.perf.timer import CaptureUnsupported, time_cuda_graph
    x, side = torch.randn(1024, device="cuda"), torch.cuda.Stream()

    def fn():
        with torch.cuda.stream(side):
            return x + 1
    with pytest.raises(CaptureUnsupported):
        time_cuda_graph(fn, warmup=2, iters=3, reps_per_graph=4)


@pytest.mark.gpu
def test_the_device_computes_and_syncs_after_a_failed_capture():
    """A capture left underway would make this .item() (a sync) fail on this thread."""
    import torch
    from tools.perf.timer import CaptureUnsupported, time_cuda_graph
    x = torch.arange(1024, device="cuda", dtype=torch.float32)
    with pytest.raises(CaptureUnsupported):
        time_cuda_graph(_syncing(x), warmup=2, iters=3, reps_per_graph=4)
    assert (x + 1).sum().item() == 1024 * 1025 / 2


@pytest.mark.gpu
def test_a_good_forward_is_graph_timed_after_a_failed_capture():
    import torch
    from tools.perf.timer import CaptureUnsupported, time_cuda_graph
    x = torch.randn(1024, device="cuda")
    with pytest.raises(CaptureUnsupported):
        time_cuda_graph(_syncing(x), warmup=2, iters=3, reps_per_graph=4)
    samples = time_cuda_graph(lambda: x + 1, warmup=2, iters=3, reps_per_graph=4)
    assert len(samples) == 3 and all(s > 0 for s in samples)


@pytest.mark.gpu
def test_a_failed_capture_leaves_no_allocator_capture_pool_underway():
    """A pool left in the allocator's captures-underway list defers frees of blocks
    used on other streams forever: a block recorded on a side stream is then never
    reused, and reserved memory grows with every such free."""
    import torch
    from tools.perf.timer import CaptureUnsupported, time_cuda_graph
    x = torch.randn(1024, device="cuda")
    with pytest.raises(CaptureUnsupported):
        time_cuda_graph(_syncing(x), warmup=2, iters=3, reps_per_graph=4)
    side = torch.cuda.Stream()

    def free_one_used_on_the_side_stream():
        t = torch.empty(8 << 20, dtype=torch.uint8, device="cuda")
        t.record_stream(side)
        del t
        torch.cuda.synchronize()
    free_one_used_on_the_side_stream()      # the first may reserve a segment (20 MiB for 8 MiB)
    before = torch.cuda.memory_reserved()
    for _ in range(49):
        free_one_used_on_the_side_stream()
    assert torch.cuda.memory_reserved() - before <= 2 * (8 << 20)


@pytest.mark.gpu
def test_the_last_output_of_a_graph_timed_forward_holds_the_last_replays_result():
    import torch
    from tools.perf.timer import time_cuda_graph
    x = torch.zeros(1024, device="cuda")
    last = [None]

    def fn():
        x.add_(1)             # each call, and so each replayed call, adds one
        last[0] = x * 2
    time_cuda_graph(fn, warmup=1, iters=3, reps_per_graph=2)
    # runs: 1 warm-up + 2 (the untimed upload replay) + 3 x 2 (timed replays); a
    # captured call only records its kernels
    assert torch.equal(last[0], torch.full_like(x, 2 * 9))
