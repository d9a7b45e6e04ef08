"""A reference that keeps state between calls, judged as KernelBench calls it.

KernelBench builds Model and ModelNew once each and calls both on the same new inputs,
trial after trial: a forward that stores state (an RNN cell's hidden state in a plain
tensor attribute) is compared call k against call k. The session finds such a reference
when it gives other outputs on a second call but a model built afresh gives the first
ones again (tools/judge/reference.py `state_carried`); it then computes, once, the
reference's outputs over `call_plan` from a fresh model (`CallSequence`), and every
candidate's ModelNew is built afresh and called in the same order (tools/judge/trials.py).
"""
from __future__ import annotations

import threading
import time

from tools.judge import memory


def call_plan(seeds: list[int]) -> list[int]:
    """A stateful reference's calls, in order, each by the seed of its inputs: the first
    trial twice (the repeated call), every other trial once, then the kernel-less call of
    tools/judge/ownership.py on its trial's inputs."""
    from tools.judge.ownership import off_trial
    return [seeds[0], *seeds, seeds[off_trial(seeds)]]


class CallSequence:
    """The reference's outputs over a call plan, call by call, and their float64 truths
    (one float64 copy carried through the same calls, made at the first ask)."""

    def __init__(self, judge, plan: list[int], outputs: list[list]):
        self._judge = judge
        self.plan = plan
        self.outputs = outputs
        self._precise: list | None = None
        self._lock = threading.Lock()

    def precise(self, position: int) -> list | None:
        from tools.judge.reference import precise_sequence
        judge = self._judge
        with self._lock:
            if self._precise is None:
                t = time.monotonic()
                self._precise = precise_sequence(judge.fresh_reference_model(), judge.problem.module, self.plan,
                                                 judge.dev)
                judge.setup_s["precise_references"] = round(judge.setup_s.get("precise_references", 0.0)
                                                            + time.monotonic() - t, 3)
                memory.release(judge.dev)
            return self._precise[position]


def as_sequence(judge, seed: int, found: tuple[str, str]) -> tuple[tuple[str, str] | None, CallSequence | None]:
    """For a reference check_reproducible found "unreproducible_reference" on: (None, its
    CallSequence) when it keeps state between calls (a model built afresh gives its first
    outputs again); else (`found`, None), or (why it cannot be judged call by call here:
    its outputs too large to keep, None)."""
    from tools.judge.reference import sequence_outputs, state_carried
    s = judge.settings.test
    if not state_carried(judge.fresh_reference_model, judge.problem.module, seed, judge.dev, judge.reference(seed), s):
        return found, None
    if judge.lean or not judge._ref_cache_ok:
        return ("unreproducible_reference", "the reference keeps state between calls (a model built afresh gives "
                "its first outputs again, a second call does not), and its calls' outputs are too large to keep "
                "for a judgement call by call here: no candidate can be checked against it"), None
    plan = call_plan(judge.seeds)
    outputs = memory.retry_oom(judge, "the reference's calls in turn", lambda: sequence_outputs(
        judge.fresh_reference_model(), judge.problem.module, plan, judge.dev, s))
    return None, CallSequence(judge, plan, outputs)
