"""Whose fault: a call into the problem's code that raised in the judge is the file's only
when a fresh process agrees.

The judge runs the problem's own code (tools/problem.py): its import, get_init_inputs()
and get_inputs() on the meta device, Model(*get_init_inputs()), get_inputs() on the
device, the reference forward. When one raises, `blame` names the file (BadInput, exit 2,
one line) only when the same step, replayed by a fresh interpreter (tools/recheck.py:
same device, seeds and module mode, a worker's scrubbed environment), raises the same
exception type at the same step. Otherwise the judge process was at fault, not the file: a lazy torch
import raced by another thread (tools/judge/warm.py), state another session left behind;
that is an EvaluatorError (exit 3) that says so and asks for a report. Running out of
memory is this machine's limit, never the file's: exit 3 at once, no replay.

Does not run the problem's code itself (recheck.py does, in the fresh process).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from tools.errors import BadInput, EvaluatorError, describe_fault
from tools.sandbox.env import worker_env

# a fresh interpreter imports torch, makes a KernelBench-size input (up to 17 GB) and runs
# one forward; it runs only after a step failed, so be generous
RECHECK_TIMEOUT_S = 180.0

# the judge's calls into a problem's code: what each is called in messages, and the calls
# recheck.py replays for it (those the judge made before it, in order, then itself)
STEPS = {
    "import": ("importing the problem file", ("import",)),
    "meta_init": ("get_init_inputs() on the meta device", ("import", "meta_init")),
    "meta_inputs": ("get_inputs() on the meta device", ("import", "meta_init", "meta_inputs")),
    "model": ("Model(*get_init_inputs())", ("import", "model")),
    "inputs": ("get_inputs()", ("import", "inputs")),
    "forward": ("the reference Model.forward(*get_inputs())", ("import", "model", "inputs", "forward")),
}


@dataclass(frozen=True)
class Step:
    """One call of the judge's into the problem's code, with what replaying it needs."""
    name: str               # a key of STEPS
    device: str = "cpu"     # the judge's device string: "cpu" or "cuda:N"
    seed: int = 0           # the trial seed (inputs, forward)
    init_seed: int = 0      # the weight-init seed (model, forward)
    module_mode: str = "train"   # [eval] module_mode (model, forward)


def blame(path, e: BaseException, what: str, step: Step, *, confirm: bool = True) -> NoReturn:
    """Raise for `e`, raised by the problem's `what` in the judge: BadInput naming `path`
    when it is the file's fault, else EvaluatorError. `confirm=False`: no other thread of
    this process ran meanwhile (the caller knows), so the fault is the file's as it stands."""
    if isinstance(e, BadInput):   # the file's fault, named already (tools/problem.py make_inputs)
        raise e
    fault = describe_fault(e)
    if _out_of_memory(e):
        raise EvaluatorError(f"{path}: {what} ran out of memory: {fault}") from None
    if not confirm:
        raise BadInput(path, f"{what} raised {fault}") from None
    fresh = replay(os.path.abspath(str(path)), step)
    if not fresh.get("ok") and fresh.get("step") == step.name and fresh.get("type") == qualified_type(e):
        raise BadInput(path, f"{what} raised {fault}") from None
    if fresh.get("ok"):
        there = "not in a fresh process (same device, seeds and module mode)"
    elif fresh.get("step") in STEPS:
        there = f"{STEPS[fresh['step']][0]} raised {fresh.get('fault')} in a fresh process"
    else:
        there = f"a fresh process could not replay it ({fresh.get('why', 'no result')})"
    raise EvaluatorError(f"{path}: {what} raised {fault} in the judge but {there}; please report") from None


def qualified_type(e: BaseException) -> str:
    return f"{type(e).__module__}.{type(e).__qualname__}"


def replay(path: str, step: Step) -> dict:
    """recheck.py's answer for `step` of the problem at `path`, or {"why": ...} when the
    fresh process gave none (timed out, died)."""
    kind, _, index = step.device.partition(":")
    kind = "cuda" if kind == "cuda" else "cpu"
    with tempfile.TemporaryDirectory(prefix="krefine-recheck-") as tmp:
        work = Path(tmp)
        (work / "tmp").mkdir()
        (work / "triton-cache").mkdir()
        out = work / "result.json"
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "tools.recheck", path, step.name, "--device", kind,
                 "--seed", str(step.seed), "--init-seed", str(step.init_seed),
                 "--module-mode", step.module_mode, "--out", str(out)],
                cwd=work,                                          # temp cwd, removed afterwards
                env=worker_env(work, kind, int(index or 0)),      # scrubbed: none of the judge's state
                stdin=subprocess.DEVNULL,                          # no stdin
                stdout=subprocess.DEVNULL,                         # the problem's prints go nowhere
                stderr=subprocess.PIPE,                            # its last line, if it died
                close_fds=True,                                    # inherits no descriptor of the judge
                start_new_session=True)                            # own process group: killpg on timeout
        except OSError as e:
            return {"why": f"could not start: {e}"}
        try:
            _, err = proc.communicate(timeout=RECHECK_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return {"why": f"it took longer than {RECHECK_TIMEOUT_S:g} s"}
        try:
            return json.loads(out.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            tail = [ln for ln in err.decode("utf-8", "replace").splitlines() if ln.strip()][-1:]
            return {"why": f"exit status {proc.returncode}" + (f": {tail[0][:200]}" if tail else "")}


def _out_of_memory(e: BaseException) -> bool:
    import torch
    return isinstance(e, getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError))
