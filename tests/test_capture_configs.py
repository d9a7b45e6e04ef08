"""tools/dialect/inductor_capture.py reads the autotuner's chosen launch configs while the
compiled module is still loaded: the fresh Inductor cache it compiles under clears
PyCodeCache on exit, so a read after it found no module and every seed on the H100 fell
back to Inductor's first heuristic config (47_Sum_reduction: 0.22x torch.compile)."""
from __future__ import annotations

import contextlib
from pathlib import Path

from tools.dialect import inductor_capture
from tools.problem import load_problem

PROBLEM = Path(__file__).resolve().parents[1] / "tests" / "dialect" / "problems" / "relu_odd.py"


def test_the_chosen_configs_are_read_before_the_fresh_cache_closes(monkeypatch):
    from torch._inductor import utils as inductor_utils
    real = getattr(inductor_utils, "fresh_cache", None) or inductor_utils.fresh_inductor_cache
    state = {"open": False, "read_while_open": None}

    @contextlib.contextmanager
    def tracked(*args, **kwargs):
        with real(*args, **kwargs):
            state["open"] = True
            try:
                yield
            finally:
                state["open"] = False

    def chosen(code):
        state["read_while_open"] = state["open"]
        return {}
    monkeypatch.setattr(inductor_utils, "fresh_cache", tracked, raising=False)
    monkeypatch.setattr(inductor_utils, "fresh_inductor_cache", tracked, raising=False)
    monkeypatch.setattr(inductor_capture, "_chosen_configs", chosen)
    inductor_capture.capture(load_problem(PROBLEM), "cpu")
    assert state["read_while_open"] is True
