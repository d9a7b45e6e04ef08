"""The worker's runtime watch (tools/sandbox/watch.py) and the judge's reading of it
(tools/judge/runtime_facts.py), each proven with the static guards switched off, so
that a finding comes from the run alone: the output contract, every call counted, Triton
programs that actually run, host reads of tensor data, and tampering (hooks replaced,
profile hooks, dispatch modes popped, threads)."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tools import sandbox
from tools import settings as cfg
from tools.verdict import Status

PROBLEMS = Path(__file__).parent / "exploits" / "problems"
SETUP = {"op": "setup", "device": "cpu", "max_file_mib": 16, "address_space_gib": 16, "gpu_cross_compile": False}

HEAD = '''
import os
import threading
import numpy as np
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


@triton.jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


def relu(x):
    out = torch.empty_like(x)
    relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
    return out


def copy(x):
    out = torch.empty_like(x)
    copy_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
    return out
'''


def _model(forward: str, prelude: str = "") -> str:
    body = "\n".join("        " + line for line in forward.strip("\n").splitlines())
    return HEAD + prelude + f"\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n{body}\n"


@pytest.fixture
def no_static_guards(monkeypatch):
    """The static guards find nothing: what is rejected here, the run showed."""
    import tools.guards.suite as suite
    monkeypatch.setattr(suite, "run_static_guards", lambda src, settings: [])


def _judge(src: str, lean: bool = False):
    from shared_judges import verdict_of
    from tools.problem import load_problem
    test = dataclasses.replace(cfg.TrialSettings(), trials=2, **({"lean_memory_mib": 0} if lean else {}))
    timing = dataclasses.replace(cfg.TimingSettings(), warmup=2, rounds=2, iters_per_round=5, compile_baseline=False)
    return verdict_of(load_problem(PROBLEMS / "relu.py"), src, device="cpu",
                      settings=cfg.EvalSettings(test=test, timing=timing))


def _kinds(verdict) -> list[str]:
    return [d.kind for d in verdict.diagnostics]


def _trial(src: str) -> dict:
    """The worker's reply to one repeated trial of `src` on the relu problem."""
    w = sandbox.start_worker(src, device="cpu")
    try:
        assert w.request(SETUP, 120)[0]["ok"]
        loaded, _ = w.request({"op": "load", "problem": str(PROBLEMS / "relu.py"), "candidate": "candidate.py",
                               "init_seed": 42}, 120)
        assert loaded["ok"], loaded
        reply, _ = w.request({"op": "trial", "seed": 7, "poison": [], "repeat": True}, 120)
        return reply
    finally:
        w.close()


OK = _model("return relu(x.contiguous())")


# 1) the output contract ------------------------------------------------------------------

FAKE_NAME = '''
class Fake(torch.Tensor):
    __module__ = "torch"
    __qualname__ = "Tensor"

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        raise RuntimeError("a method of the output object ran after the forward")
'''


def test_a_tensor_subclass_calling_itself_torch_tensor_is_named_for_what_it_is_and_never_touched():
    reply = _trial(_model("return relu(x).as_subclass(Fake)", FAKE_NAME))
    assert reply["ok"], reply.get("message")
    assert reply["output_types"] == ["subclass of torch.Tensor: Tensor"]


LAZY = '''
class Lazy(torch.Tensor):
    __module__ = "torch"
    __qualname__ = "Tensor"

    def detach(self):   # the harness's first call on an output: the work happens here, untimed
        return relu(self.as_subclass(torch.Tensor))
'''


def test_an_output_whose_own_methods_do_the_work_after_the_forward_is_incorrect(no_static_guards):
    verdict = _judge(_model("return copy(x).as_subclass(Lazy)", LAZY))
    assert verdict.status is Status.INCORRECT and "output_type" in _kinds(verdict)


def test_every_output_of_a_tuple_must_be_an_exact_tensor(no_static_guards):
    verdict = _judge(_model("return (copy(x).as_subclass(Lazy),)", LAZY))
    assert verdict.status is Status.INCORRECT and "output_type" in _kinds(verdict)


# 2) every call watched ---------------------------------------------------------------------

ALTERNATE = '''
CALLS = [0]


def relu_when_watched(x):
    CALLS[0] += 1
    if CALLS[0] % 2 == 0:   # the calls the old counter skipped: a library op does the work
        out = copy(x)
        return out * (out > 0)
    return relu(x)
'''


def test_aten_ops_of_the_second_call_of_a_trial_are_counted():
    reply = _trial(_model("return relu_when_watched(x)", ALTERNATE))
    assert reply["ok"] and reply["aten_compute"], reply


@pytest.mark.parametrize("lean", [False, True], ids=["copies", "lean"])
def test_a_candidate_that_uses_a_library_op_only_on_later_calls_is_rejected(no_static_guards, lean):
    verdict = _judge(_model("return relu_when_watched(x)", ALTERNATE), lean=lean)
    assert verdict.status is Status.REJECTED and "guard:library_ops" in _kinds(verdict)


# 3) Triton programs that run ------------------------------------------------------------------

def test_the_programs_each_call_ran_are_reported():
    assert _trial(OK)["programs"] == [16, 16]


@pytest.mark.parametrize("grid", ["(0,)", "lambda meta: (0, 4)"], ids=["tuple", "callable"])
def test_a_launch_with_an_empty_grid_runs_no_program(grid):
    src = _model(f"out = torch.zeros_like(x)\nrelu_kernel[{grid}](x, out, x.numel(), BLOCK=1024)\nreturn out")
    assert _trial(src)["programs"] == [0, 0]


def test_a_forward_whose_only_launch_has_an_empty_grid_is_rejected(no_static_guards):
    verdict = _judge(_model("out = torch.zeros_like(x)\nrelu_kernel[(0,)](x, out, x.numel(), BLOCK=1024)\n"
                            "return out"))
    assert verdict.status is Status.REJECTED and "guard:no_triton_program" in _kinds(verdict)
    assert "no_triton_kernel" in verdict.flags


# 4) host reads of tensor data ------------------------------------------------------------------

READS = {
    "tolist": "vals = x.reshape(-1).tolist()",
    "item": "v = x[0, 0].item()",
    "float_of_element": "v = float(x[0, 0])",
    "iterate_then_float": "v = [float(r) for r in x[0, :4]]",
    "numpy": "a = x.numpy()",
    "np_asarray": "a = np.asarray(x)",
    "np_from_dlpack": "a = np.from_dlpack(x)",
    "untyped_storage": "b = bytes(x.untyped_storage())",
    "bool": "b = bool(x[0, 0])",
    "index": "i = [7][torch.zeros((), dtype=torch.long)]",
}


@pytest.mark.parametrize("spelling", list(READS), ids=list(READS))
def test_a_host_read_of_tensor_data_in_the_forward_is_rejected(no_static_guards, spelling):
    verdict = _judge(_model(f"{READS[spelling]}\nreturn relu(x)"))
    assert verdict.status is Status.REJECTED and "guard:host_transfer" in _kinds(verdict), _kinds(verdict)
    assert "host_compute" in verdict.flags


def test_the_answer_computed_in_python_on_host_copies_is_rejected(no_static_guards):
    src = _model("vals = [max(v, 0.0) for v in x.reshape(-1).tolist()]\n"
                 "return copy(torch.tensor(vals, dtype=x.dtype).reshape(x.shape))")
    verdict = _judge(src)
    assert verdict.status is Status.REJECTED and "guard:host_transfer" in _kinds(verdict)


def test_triton_interpreters_own_reads_of_the_arguments_are_not_the_candidates():
    reply = _trial(OK)
    assert reply["host_reads"] == {} and reply["programs"] == [16, 16]


# 5) tampering with what decides ---------------------------------------------------------------

COUNTER_REPLACED = '''
import contextlib
for name in ("tools.sandbox.worker", "tools.sandbox.outputs", "tools.sandbox.watch"):
    module = os.sys.modules.get(name)
    if module is not None:
        module.count_aten_compute = lambda *a, **k: contextlib.nullcontext()
'''


def test_the_workers_counting_function_replaced_at_import_is_tampering(no_static_guards):
    verdict = _judge(_model("out = copy(x)\nreturn out * (out > 0)", COUNTER_REPLACED))
    assert verdict.status is Status.REJECTED and "guard:tampering" in _kinds(verdict)
    assert {"tampering", "monkeypatch"} <= set(verdict.flags)


HANDLER_REPLACED = '''
def _forged(self, h):
    import torch
    from tools.sandbox import channel
    x, n = self._inputs(int(h["seed"]))[0], 2 if h.get("repeat") else 1
    specs, payload = channel.pack_tensors([torch.relu(x)] * n)
    return {"ok": True, "structure": ["tensor"] * n, "outputs": specs, "output_types": ["torch.Tensor"] * n,
            "output_devices": ["cpu"] * n, "inputs_mutated": [], "launches": {"relu_kernel": n},
            "aten_compute": {}}, payload


os.sys.modules["tools.sandbox.worker"].Worker.op_trial = _forged
'''


def test_a_request_handler_replaced_at_import_is_not_used_and_is_tampering(no_static_guards):
    verdict = _judge(_model("return relu(x)", HANDLER_REPLACED))
    assert verdict.status is Status.REJECTED and "guard:tampering" in _kinds(verdict)


SPY = '''
TALLIES = []


def _spy(frame, event, arg):
    if event == "c_call" and type(getattr(arg, "__self__", None)) is dict:
        TALLIES.append(arg.__self__)


def emptied(x):
    os.sys.setprofile(_spy)
    out = copy(x)
    out = out * (out > 0)
    os.sys.setprofile(None)
    for d in TALLIES:
        if any(str(k).startswith("aten.") for k in d):
            d.clear()
    return out
'''


def test_a_profile_hook_set_and_removed_within_the_forward_is_tampering(no_static_guards):
    verdict = _judge(_model("return emptied(x)", SPY))
    assert verdict.status is Status.REJECTED and "guard:tampering" in _kinds(verdict)
    assert any("sys.setprofile" in t for t in verdict.checks["tamper"])


POPPED = '''
def unwatched(x):
    dispatch = os.sys.modules["torch.utils._python_dispatch"]
    out = copy(x)
    with dispatch._disable_current_modes():
        return out * (out > 0)
'''


def test_dispatch_modes_popped_through_another_modules_name_is_tampering(no_static_guards):
    verdict = _judge(_model("return unwatched(x)", POPPED))
    assert verdict.status is Status.REJECTED and "guard:tampering" in _kinds(verdict)


def test_a_thread_started_and_joined_within_the_forward_is_reported():
    src = _model("t = threading.Thread(target=lambda: None)\nt.start()\nt.join()\nreturn relu(x)")
    assert _trial(src)["threads_started"] == 2   # one per call, the trial's two calls


QUEUE_LISTENER = '''
import logging
import logging.handlers
import queue


class _Relu(logging.Handler):
    def __init__(self, x, out):
        super().__init__()
        self.x, self.out = x, out

    def handle(self, record):   # runs on the listener's thread, where no dispatch mode is
        self.out.copy_(self.x * (self.x > 0))


def in_a_thread(x):
    out = copy(x)
    q = queue.Queue()
    listener = logging.handlers.QueueListener(q, _Relu(x, out))
    listener.start()
    q.put(logging.makeLogRecord({}))
    listener.stop()
    return out
'''


def test_compute_moved_to_a_thread_a_standard_library_helper_starts_is_rejected(no_static_guards):
    verdict = _judge(_model("return in_a_thread(x)", QUEUE_LISTENER))
    assert verdict.status is Status.REJECTED and "guard:concurrency" in _kinds(verdict)
    assert "concurrency" in verdict.flags


def test_an_inputs_class_reassigned_in_the_forward_is_tampering(no_static_guards):
    src = _model("x.__class__ = Sub\nreturn relu(x.as_subclass(torch.Tensor))",
                 "\n\nclass Sub(torch.Tensor):\n    pass\n")
    verdict = _judge(src)
    assert verdict.status is Status.REJECTED and "guard:tampering" in _kinds(verdict)


def _built(init: str, forward: str = "return relu(x)", prelude: str = "") -> str:
    lines = lambda text: "\n".join("        " + line for line in text.strip("\n").splitlines())  # noqa: E731
    return HEAD + prelude + ("\n\nclass ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                             f"{lines(init)}\n\n    def forward(self, x):\n{lines(forward)}\n")


def test_weight_norm_on_a_module_the_candidate_builds_is_not_tampering(no_static_guards):
    # torch.nn.utils.parametrize gives the Linear a subclass of its class (Module.__class__ set)
    verdict = _judge(_built("self.lin = nn.utils.parametrizations.weight_norm(nn.Linear(4, 4))"))
    assert verdict.status is Status.CORRECT and "guard:tampering" not in _kinds(verdict)


def test_a_modules_class_the_candidate_swaps_itself_while_building_is_tampering(no_static_guards):
    verdict = _judge(_built("self.lin = nn.Linear(4, 4)\nself.lin.__class__ = Sub",
                            prelude="\n\nclass Sub(nn.Linear):\n    pass\n"))
    assert verdict.status is Status.REJECTED and "guard:tampering" in _kinds(verdict)


def test_a_parametrization_registered_during_the_forward_is_tampering(no_static_guards):
    verdict = _judge(_built("self.lin = nn.Linear(4, 4)",
                            "nn.utils.parametrizations.weight_norm(self.lin)\nreturn relu(x)"))
    assert verdict.status is Status.REJECTED and "guard:tampering" in _kinds(verdict)


def test_a_correct_candidate_shows_no_tampering_threads_or_host_reads():
    reply = _trial(OK)
    assert reply["ok"] and "tamper" not in reply and reply["threads_started"] == 0 and not reply["host_reads"]


# 6) the judge's reading of the facts -----------------------------------------------------------

def _facts(reply: dict):
    from tools.judge.record import Evaluation
    from tools.judge.runtime_facts import check_runtime_facts
    run = Evaluation(None, "", "cpu", 0, cfg.EvalSettings(), None)
    return check_runtime_facts(run, {"ok": True, **reply}, 0), run


def test_a_hook_point_the_worker_lacks_is_recorded_in_the_verdicts_checks_not_passed_over_silently():
    status, run = _facts({"programs": [None, 4], "launch_grids_unseen": 1, "watch_gaps": ["thread starts"]})
    assert status is None
    assert run.checks["runtime_watch_gaps"] == ["thread starts"] and run.checks["launch_grids_unseen"] == 1
    assert run.checks["triton_programs"] == [[None, 4]]


def test_one_call_of_a_trial_that_ran_no_program_is_enough_to_reject():
    status, run = _facts({"programs": [16, 0]})
    assert status is Status.REJECTED and "call 2" in run.diagnostics[0].message



def test_a_custom_op_counts_as_compute_whatever_its_name():
    """A custom op named like a data op (`r2w::copy_`) runs its body below the counting
    mode; the counter reads the op's namespace, so it is compute, not data movement."""
    import torch
    from tools.sandbox.outputs import count_aten_compute

    def positive(x):
        return x * (x > 0)
    positive = torch.library.custom_op("r2w::copy_", positive, mutates_args=(),
                                       schema="(Tensor x) -> Tensor")

    x, counts = torch.randn(8), {}
    with count_aten_compute(counts, None):
        positive(x)
    assert counts == {"r2w::copy_ (custom op)": 1}


def test_the_toolchain_modules_a_candidate_names_are_imported_before_the_watch_starts(tmp_path):
    """What torch's Inductor runtime does when first imported (on cuda it sets hooks of its
    own) belongs to the baseline, not to the candidate: the worker imports the torch and
    Triton modules the candidate names before the watch's baseline, and nothing else."""
    import subprocess
    import sys
    cand = tmp_path / "c.py"
    cand.write_text("import json\nimport torch\nfrom torch._inductor.runtime import triton_helpers\n"
                    "from torch._inductor.runtime.triton_heuristics import grid\nimport not_a_module_xyz\n"
                    "raise SystemExit('candidate code ran')\n")
    code = ("from tools.sandbox.toolchain import preimport_toolchain\n"
            f"done = preimport_toolchain({str(cand)!r})\n"
            "print(sorted(done))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         cwd=Path(__file__).resolve().parents[1])
    lines = out.stdout.splitlines()
    assert "torch._inductor.runtime.triton_heuristics" in lines[0] and "torch._inductor.runtime" in lines[0]
    assert "not_a_module_xyz" not in lines[0] and "candidate code ran" not in out.stdout + out.stderr


def test_a_tamper_note_names_the_line_that_raised_the_event():
    import sys as _sys
    from tools.sandbox.faults import audit_where as _where

    def audit():              # stands where Watch._audit stands
        return _where()

    def raiser():
        return audit(), _sys._getframe().f_lineno
    where, line = raiser()
    assert where.startswith(" (from ") and where.endswith(f"/tests/test_runtime_watch.py:{line})")


# 7) around the wrappers: tensor memory, registrations, introspection (tools/sandbox/detours.py) ----

AROUND = {   # (prelude, forward): no Tensor method the watch wraps is called
    "proc_mem_from_pieces": ("import pathlib", 'p = pathlib.Path("/".join(["", "pr" + "oc", "self", "mem"]))\n'
                             'with p.open("rb") as f:\n    f.seek(x.data_ptr())\n    b = f.read(64)'),
    "proc_pid_mem_pread": ("", 'fd = os.open(f"/{\'proc\'}/{os.getpid()}/mem", os.O_RDONLY)\n'
                           "b = os.pread(fd, 64, x.data_ptr())\nos.close(fd)"),
    "mmap_made_at_import": ("import mmap\nAREA = mmap.mmap(-1, 4096)", ""),
    "pickle": ("import pickle", "b = pickle.dumps(x)"),
    "torch_save_to_bytes": ("import io", "torch.save(x, io.BytesIO())"),
    "storage_write_file": ("import io", "x.untyped_storage()._write_file(io.BytesIO(), False, False, 4)"),
    "dlpack_capsule": ("", "c = torch.utils.dlpack.to_dlpack(x)"),
}


@pytest.mark.parametrize("spelling", list(AROUND), ids=list(AROUND))
def test_tensor_memory_reached_around_the_wrappers_is_reported(spelling):
    prelude, forward = AROUND[spelling]
    reply = _trial(_model(f"{forward}\nreturn relu(x)", prelude))
    assert reply.get("memory_reads"), reply


REGISTRATIONS = {
    "namespace_in_a_variable": 'NS = "r3" + "w"\nLIB = torch.library.Library(NS, "DEF")\n'
                               'LIB.define("f(Tensor x) -> Tensor")',
    "custom_op": '@torch.library.custom_op("r3w::g", mutates_args=())\n'
                 'def g(x: torch.Tensor) -> torch.Tensor:\n    return x.clone()',
    "dispatch_rule_for_a_mode": "from torch.utils._python_dispatch import TorchDispatchMode\n"
                                'torch.library.register_torch_dispatch("aten::mul.Tensor", TorchDispatchMode, print)',
    "library_written_to_the_temp_dir": 'import mmap\nimport shutil\nshutil.copy(mmap.__file__, "ops.so")\n'
                                       'torch.ops.load_library("ops.so")',
}


@pytest.mark.parametrize("spelling", list(REGISTRATIONS), ids=list(REGISTRATIONS))
def test_an_operator_registration_by_candidate_code_is_reported(spelling):
    reply = _trial(_model("return relu(x)", REGISTRATIONS[spelling]))
    assert reply.get("op_registrations"), reply


def test_operators_a_torch_module_registers_when_the_candidate_imports_it_are_not_the_candidates():
    reply = _trial(_model("return relu(x)", "import torch.ao.quantization.fx._decomposed"))
    assert "op_registrations" not in reply and "tamper" not in reply, reply


def test_a_system_library_loaded_by_its_name_is_no_registration():
    reply = _trial(_model("return relu(x)", 'import ctypes\nLIBM = ctypes.CDLL("libm.so.6")'))
    assert "op_registrations" not in reply, reply


INTROSPECTION = {
    "getclosurevars_of_the_launch_hook": ("import inspect\nfrom triton.runtime.jit import JITFunction",
                                          "v = inspect.getclosurevars(JITFunction.run)"),
    "frame_walk": ("", "f = os.sys._getframe(1)"),
    "a_tracebacks_frame": ("", "try:\n    raise ValueError\nexcept ValueError as e:\n"
                               "    f = e.__traceback__.tb_frame.f_back"),
}


@pytest.mark.parametrize("spelling", list(INTROSPECTION), ids=list(INTROSPECTION))
def test_introspection_that_reaches_the_judge_is_tampering(spelling):
    prelude, forward = INTROSPECTION[spelling]
    reply = _trial(_model(f"{forward}\nreturn relu(x)", prelude))
    assert any("frame taken" in t or "introspected" in t for t in reply.get("tamper", [])), reply


def test_a_library_reading_frames_for_itself_is_not_the_candidate_taking_one():
    prelude = 'import logging\nLOG = logging.getLogger("candidate")\nLOG.setLevel(logging.INFO)'
    reply = _trial(_model('LOG.info("forward")\nreturn relu(x)', prelude))   # findCaller: sys._getframe
    assert "tamper" not in reply, reply


def test_a_correct_candidate_reaches_nothing_around_the_wrappers():
    reply = _trial(OK)
    assert not {"memory_reads", "op_registrations", "tamper"} & set(reply), reply


def test_the_judge_rejects_reads_around_the_wrappers_and_registrations():
    status, run = _facts({"memory_reads": ["open /proc/12/mem"]})
    assert status is Status.REJECTED and {"host_compute", "filesystem"} <= set(run.flags)
    status, run = _facts({"memory_reads": ["mmap of anonymous memory"]})
    assert status is Status.REJECTED and "filesystem" not in run.flags
    status, run = _facts({"op_registrations": ["dispatcher impl('clone', 'CPU')"]})
    assert status is Status.REJECTED and "library_ops" in run.flags
    assert run.diagnostics[0].kind == "guard:op_registration"
