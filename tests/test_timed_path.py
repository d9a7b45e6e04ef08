"""What was timed is what was checked, on CPU: the worker's launch log
(tools/sandbox/signatures.py), the judge's rule on it (tools/judge/timed_path.py), the
worker's all-or-nothing refill of timed inputs, and the time phase's fresh check seed
with the recheck of the timed mechanism's outputs. The GPU side (captures, replays, the
r3_gpu_* exploits) is judged by tests/test_exploits.py's gpu cases."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from tools.judge import time_phase, timed_path
from tools.judge.record import Evaluation
from tools.judge.timed_path import difference, parse
from tools.sandbox.activity import Recorder
from tools.sandbox.measure_ops import MeasureOps
from tools.sandbox.signatures import LaunchLog, grid_dims, signature
from tools.settings import EvalSettings
from tools.verdict import Status

FULL = ("relu_kernel", "aaaa", (16, 1, 1))
TOKEN = ("relu_kernel", "aaaa", (1, 1, 1))
OTHER_BINARY = ("relu_kernel", "bbbb", (16, 1, 1))
BENCH = ("relu_kernel", "cccc", (4, 1, 1))   # an autotuner config tried in the first call only


def sig(*launches) -> tuple:
    return signature(launches)


def _fake_run(kernel_hash="0123456789abcdef0123"):
    """A stand-in for the watch's launch: evaluates a callable grid as Triton does."""
    ran = []

    def run(orig, fn, args, grid, kwargs):
        dims = grid({"BLOCK": 1024}) if callable(grid) else grid
        ran.append(dims)
        return SimpleNamespace(hash=kernel_hash)
    return run, ran


# --- the worker's record ------------------------------------------------------------------

def test_an_open_call_records_name_compiled_kernel_and_the_grid_triton_evaluated():
    log, (run, ran) = LaunchLog(), _fake_run()
    fn = SimpleNamespace(__name__="relu_kernel")
    log.begin("timed")
    log.launch(run, None, fn, (), lambda meta: (16000 // meta["BLOCK"] + 1,), {})
    log.launch(run, None, fn, (), (2, 3), {})
    log.end()
    assert ran == [(16,), (2, 3)]   # Triton got the grid it was given, evaluated once
    rows = log.take()["timed"]
    assert sorted(map(tuple, rows[0][0])) == [("relu_kernel", "0123456789abcdef", [2, 3, 1], 1),
                                              ("relu_kernel", "0123456789abcdef", [16, 1, 1], 1)]
    assert len(rows) == 1 and rows[0][1] == 1


def test_launches_outside_an_open_call_are_not_recorded():
    log, (run, ran) = LaunchLog(), _fake_run()
    log.launch(run, None, SimpleNamespace(__name__="k"), (), (4,), {})
    assert ran == [(4,)] and log.take()["timed"] == []


def test_a_call_whose_forward_raised_is_not_counted():
    log, (run, _) = LaunchLog(), _fake_run()
    log.begin("checked")
    log.launch(run, None, SimpleNamespace(__name__="k"), (), (4,), {})
    log.begin("checked")   # the next call: the one left open is dropped
    log.end()
    assert log.take()["checked"] == [[[], 1]]


def test_take_forgets_the_timed_calls_and_keeps_the_checked_ones():
    log, (run, _) = LaunchLog(), _fake_run()
    for kind in ("checked", "timed"):
        log.begin(kind)
        log.launch(run, None, SimpleNamespace(__name__="k"), (), (4,), {})
        log.end()
    first = log.take()
    second = log.take()
    assert first["timed"] and second["timed"] == [] and second["checked"] == first["checked"]


def test_a_signature_is_a_multiset_so_launch_order_does_not_matter():
    assert sig(FULL, TOKEN) == sig(TOKEN, FULL) != sig(FULL, FULL)


def test_grids_are_three_ints_or_a_description_that_reads_nothing():
    assert grid_dims((4,)) == (4, 1, 1) and grid_dims([4, 2]) == (4, 2, 1)
    assert grid_dims((4, True)) == "(4, bool)" and grid_dims(object()) == "object"


def test_the_record_survives_the_wire_as_the_same_signatures():
    log, (run, _) = LaunchLog(), _fake_run("aaaa")
    log.attach()
    for grid in ((16,), (16,), (1,)):
        log.begin("timed")
        log.launch(run, None, SimpleNamespace(__name__="relu_kernel"), (), grid, {})
        log.end()
    assert parse(log.take()["timed"]) == {sig(FULL): 2, sig(TOKEN): 1}


def test_a_recorder_of_trial_calls_opens_checked_calls_even_without_cupti():
    worker = SimpleNamespace(launches={}, launch_log=LaunchLog())
    with Recorder(worker, False).record():
        pass
    with Recorder(worker, False, checked=False).record():
        pass
    assert worker.launch_log.take()["checked"] == [[[], 1]]


# --- the judge's rule ------------------------------------------------------------------------

def test_timed_calls_that_repeat_a_checked_call_pass():
    assert difference({sig(FULL): 3}, {sig(FULL): 200}) is None


def test_a_first_call_that_autotunes_does_not_make_the_later_ones_differ():
    checked = {sig(BENCH, BENCH, OTHER_BINARY, FULL): 1, sig(FULL): 4}
    assert difference(checked, {sig(FULL): 120}) is None


def test_a_token_grid_under_timing_is_a_difference_with_fewer_programs():
    found = difference({sig(FULL): 3}, {sig(FULL): 2, sig(TOKEN): 100})
    assert found is not None and found.calls == 100 and found.of_calls == 102 and found.fewer_programs
    assert "grid 1x1x1" in found.message and "grid 16x1x1" in found.message


def test_no_launch_at_all_under_timing_is_a_difference_with_fewer_programs():
    found = difference({sig(FULL): 3}, {sig(): 10})
    assert found is not None and found.fewer_programs and "nothing more" in found.message


def test_the_same_name_and_grid_from_another_compiled_kernel_is_a_difference():
    found = difference({sig(FULL): 3}, {sig(OTHER_BINARY): 10})
    assert found is not None and not found.fewer_programs and "compiled differently" in found.message


def test_an_extra_kernel_under_timing_is_a_difference_without_fewer_programs():
    found = difference({sig(FULL): 3}, {sig(FULL, ("scale_kernel", "dddd", (2, 1, 1))): 10})
    assert found is not None and not found.fewer_programs and "scale_kernel" in found.message


def test_timed_calls_beyond_what_the_worker_keeps_are_a_difference():
    found = difference({sig(FULL): 3}, {sig(FULL): 5}, unkept=7)
    assert found is not None and found.calls == 7


def _run() -> Evaluation:
    return Evaluation(None, "", "cuda", 0, EvalSettings())


def _reply(checked: dict, timed: dict, attached: bool = True) -> dict:
    def rows(sigs):
        return [[[[n, b, list(g), k] for (n, b, g), k in s], c] for s, c in sigs.items()]
    return {"launch_signatures": {"attached": attached, "checked": rows(checked), "timed": rows(timed),
                                  "unkept": {"checked": 0, "timed": 0}}}


def test_check_rejects_a_different_timed_path_naming_the_guard_and_flags():
    run = _run()
    status = timed_path.check(run, _reply({sig(FULL): 3}, {sig(TOKEN): 10}), "the CUDA graph capture")
    assert status is Status.REJECTED
    assert [d.kind for d in run.diagnostics] == ["guard:timed_path"]
    assert "the CUDA graph capture: 10 of 10 timed calls" in run.diagnostics[0].message
    assert {"tampering", "no_triton_kernel"} <= set(run.flags)


def test_check_passes_the_same_path_and_counts_what_it_compared():
    run = _run()
    assert timed_path.check(run, _reply({sig(FULL): 3}, {sig(FULL): 10}), "timing round 1") is None
    assert timed_path.check(run, _reply({sig(FULL): 3}, {sig(FULL): 5}), "timing round 2") is None
    assert run.checks["timed_path"] == {"checked_signatures": 1, "timed_calls_compared": 15}
    assert not run.diagnostics and not run.flags


def test_a_log_the_launch_hook_does_not_feed_decides_nothing_and_says_so():
    run = _run()
    assert timed_path.check(run, _reply({sig(FULL): 3}, {sig(TOKEN): 10}, attached=False), "r") is None
    assert "not recorded" in run.checks["timed_path"] and not run.diagnostics


def test_a_malformed_record_is_tampering():
    run = _run()
    reply = {"launch_signatures": {"attached": True, "checked": [[[["k", None, ["x"], 1]], 1]], "timed": []}}
    assert timed_path.check(run, reply, "r") is Status.REJECTED and "tampering" in run.flags


def test_a_fresh_seed_is_none_of_the_sessions_seeds():
    judge = SimpleNamespace(lean=False, seeds=[1, 2, 3], footprint=None, dev="cuda:0")
    run = _run()
    run.judge = judge
    seeds = {timed_path.fresh_seed(run, 4) for _ in range(50)}
    assert None not in seeds and not seeds & {1, 2, 3, 4}


def test_a_lean_session_with_large_inputs_keeps_the_timing_seed():
    from tools.judge.memory import Footprint
    big = Footprint(input_bytes=8 << 30, output_bytes=1 << 20, reference_peak_bytes=0)
    run = _run()
    run.judge = SimpleNamespace(lean=True, seeds=[1], footprint=big, dev="cuda:0")
    assert timed_path.fresh_seed(run, 4) is None


# --- the worker's refill of timed inputs ------------------------------------------------------

class _Inputs(MeasureOps):
    def __init__(self, make):
        self._inputs = make


def test_new_inputs_are_written_into_the_timed_tensors_themselves():
    import torch
    worker = _Inputs(lambda seed: [torch.full((2, 3), float(seed)), 7])
    inputs = [torch.zeros(2, 3), 7]
    tensor = inputs[0]
    assert worker._refill(inputs, 5) and inputs[0] is tensor and bool((tensor == 5).all())


def test_inputs_that_differ_in_more_than_values_are_left_untouched():
    import torch
    worker = _Inputs(lambda seed: [torch.full((2, 3), float(seed)), seed])
    inputs = [torch.zeros(2, 3), 7]
    assert not worker._refill(inputs, 5) and bool((inputs[0] == 0).all())
    assert not _Inputs(lambda seed: [torch.zeros(3, 2), 7])._refill([torch.zeros(2, 3), 7], 5)


# --- the time phase: a fresh seed for the checked outputs -------------------------------------

class _Worker:
    """Answers time requests; writes the check seed into its inputs when told one."""

    def __init__(self, writes: bool):
        self.writes, self.asked = writes, []

    def request(self, header, timeout_s):
        self.asked.append(header)
        fresh = "call" if self.writes and header.get("check_seed") is not None else None
        return {"ok": True, "samples_ms": [0.01] * header["iters"], "launches": 9, "calls": 9, "outputs": [],
                "fresh_inputs": fresh}, b""


@pytest.mark.parametrize("writes", [True, False])
def test_only_the_last_round_gets_a_new_seed_and_its_outputs_are_checked_on_it(monkeypatch, writes):
    rechecked = []
    monkeypatch.setattr(time_phase, "recheck_timed_outputs",
                        lambda run, reply, payload, seed: rechecked.append(seed))
    run, worker = _run(), _Worker(writes)
    rounds = {"eager": [], "candidate": []}
    assert time_phase._one_batch(run, worker, 11, "per_call", 1, {"eager": lambda warm: [0.02]}, rounds) is None
    seeds = [h["check_seed"] for h in worker.asked]
    assert seeds[:-1] == [None] * (len(seeds) - 1) and seeds[-1] not in (None, 11)
    assert rechecked == [seeds[-1] if writes else 11]


def _recheck_run(ref_value: float, fresh_ref_value: float):
    import torch
    from tools.judge import trials
    # no float64 forward (precise_reference None): the fp32 comparison decides, as for a
    # problem that cannot run in float64
    judge = SimpleNamespace(dev="cpu", lean=False, seeds=[11],
                            reference=lambda seed: [torch.full((4,), ref_value)],
                            precise_reference=lambda seed: None)
    run = _run()
    run.judge = judge
    return run, trials, lambda r, seed: [torch.full((4,), fresh_ref_value)]


def _outputs(value: float):
    import torch
    from tools.sandbox import channel
    specs, views = channel.pack_tensors([torch.full((4,), value)])
    return specs, b"".join(bytes(v) for v in views)


def test_a_graph_output_that_is_stale_on_new_inputs_is_incorrect_and_named(monkeypatch):
    run, trials, fresh_ref = _recheck_run(ref_value=1.0, fresh_ref_value=2.0)
    monkeypatch.setattr(timed_path, "fresh_reference", fresh_ref)
    specs, payload = _outputs(1.0)   # right for the timing seed, not for the new one
    reply = {"outputs": specs, "output_types": ["torch.Tensor"], "fresh_inputs": "graph"}
    assert trials.recheck_timed_outputs(run, reply, payload, 99) is Status.INCORRECT
    assert "timed CUDA graph, replayed once on new inputs" in run.diagnostics[0].message


def test_a_timed_output_right_on_new_inputs_passes_and_says_which(monkeypatch):
    run, trials, fresh_ref = _recheck_run(ref_value=1.0, fresh_ref_value=2.0)
    monkeypatch.setattr(timed_path, "fresh_reference", fresh_ref)
    specs, payload = _outputs(2.0)
    reply = {"outputs": specs, "output_types": ["torch.Tensor"], "fresh_inputs": "call"}
    assert trials.recheck_timed_outputs(run, reply, payload, 99) is None
    assert run.checks["timed_outputs_rechecked"] == "a timed call on new inputs"


def test_a_grid_given_as_a_list_is_recorded_like_the_same_tuple():
    log, (run, _) = LaunchLog(), _fake_run("aaaa")
    for grid in ([16], (16,)):
        log.begin("timed")
        log.launch(run, None, SimpleNamespace(__name__="relu_kernel"), (), grid, {})
        log.end()
    assert parse(log.take()["timed"]) == {sig(FULL): 2}


def test_a_worker_claiming_new_inputs_for_the_timing_seed_is_checked_on_the_timing_seed(monkeypatch):
    run, trials, fresh_ref = _recheck_run(ref_value=1.0, fresh_ref_value=2.0)
    monkeypatch.setattr(timed_path, "fresh_reference", fresh_ref)
    specs, payload = _outputs(1.0)
    reply = {"outputs": specs, "output_types": ["torch.Tensor"], "fresh_inputs": "graph"}
    assert trials.recheck_timed_outputs(run, reply, payload, 11) is None
    assert run.checks["timed_outputs_rechecked"] == "a timed call on the timing inputs"
