"""Why a run stops (agent/loop/state.py stop_reason): a reference no kernel can match ends it."""
from __future__ import annotations

from agent.loop.state import stop_reason


def _state(flags: list[str]) -> dict:
    record = {"id": "r00-c00", "round": 0, "origin": "inductor_seed", "status": "incorrect", "correct": False,
              "flags": flags}
    return {"candidates": {"r00-c00": record}, "round": 1, "replay_exhausted": False,
            "spent": {"rounds": 1, "candidates": 1, "sweep": 0, "tokens": 0, "wall_s": 1.0}}


def _why(state: dict) -> str | None:
    return stop_reason(state, best=None, baseline="eager", target_speedup=1.0, timed=True, max_rounds=5,
                       token_budget=None, time_budget_s=None, roofline_stop_fraction=None, has_model=True)


def test_a_stochastic_reference_verdict_stops_the_run():
    assert _why(_state(["stochastic_reference"])) == "reference_not_reproducible"


def test_an_unreproducible_reference_verdict_stops_the_run():
    assert _why(_state(["unreproducible_reference"])) == "reference_not_reproducible"


def test_an_ordinary_incorrect_verdict_lets_the_run_go_on():
    assert _why(_state(["library_ops"])) is None
