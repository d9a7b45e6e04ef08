"""tools/sandbox/launches.py: what the CPU judge hands its clean sm_90 build of each launch.
The build must see what the interpreter ran: constexprs by value, the kernel by name and
line, and a launch it cannot reproduce marked so that its check fails (whole-judge cases:
tests/exploits/r4_*, r5_*, ok_*_constexpr)."""
from __future__ import annotations

import sys
import types

import pytest
import torch
import triton
import triton.language as tl

from tools.sandbox import launches

MODULE = types.ModuleType("candidate_under_test")


def _kernel(x_ptr, n, K: tl.constexpr, BLOCK: tl.constexpr):
    pass


class _Holder:
    @staticmethod
    def kernel(x_ptr, n, BLOCK: tl.constexpr):
        pass


MODULE.kernel = triton.jit(_kernel)
MODULE._kernel = _kernel
MODULE._Holder = _Holder


@pytest.mark.parametrize("value", [3, 2.5, True, "ieee", None, (1, (2, "a")), [4, 5], tl.float16, torch.bfloat16])
def test_a_plain_constexpr_comes_back_as_its_value(value):
    back = launches.decode(launches.encode(value), MODULE)
    assert back == value and type(back) is type(value)


def test_a_wrapped_constexpr_comes_back_as_the_value_it_wraps():
    assert launches.decode(launches.encode(tl.constexpr(1024)), MODULE) == 1024


class _Off(str):
    def __eq__(self, other):
        return True

    __hash__ = str.__hash__


@pytest.mark.parametrize("value", [object(), _Off("off"), (1, object()), int, tl.pointer_type(tl.float32)])
def test_a_value_that_only_a_stand_in_could_hand_over_is_not_plain(value):
    assert not launches._plain(value)


def test_an_argument_no_gpu_launch_takes_is_named_in_the_spec():
    key, spec = launches.launch_spec(MODULE.kernel, (torch.zeros(4), object()), {"K": 1, "BLOCK": 4})
    js = launches.spec_json(spec)
    assert js["not_plain"] and "n (object" in js["not_plain"][0]
    assert launches.compile_launched(MODULE, js, 90)["ok"] is False


def test_a_launch_that_cannot_be_described_fails_its_build_check():
    key, spec = launches.launch_spec(object(), (), {})
    js = launches.spec_json(spec)
    assert "undescribed" in js and launches.compile_launched(MODULE, js, 90)["ok"] is False


def test_a_kernel_is_found_by_qualified_name_in_a_class_body_and_by_its_line():
    line = _Holder.kernel.__code__.co_firstlineno
    assert launches.find_kernel(MODULE, "_Holder.kernel", line) is _Holder.kernel
    assert launches.find_kernel(MODULE, "_Holder.kernel", line + 1) is None


def test_a_kernel_defined_inside_a_function_is_reached_by_no_name():
    def make():
        def inner(x_ptr):
            pass
        return inner
    fn = make()
    assert launches.find_kernel(sys.modules[__name__], fn.__qualname__, fn.__code__.co_firstlineno) is None


def test_a_launch_of_a_kernel_with_pre_run_hooks_is_noted_as_host_code(tmp_path):
    """Host code Triton runs at every launch of a JIT function (its pre-run hooks), with no frame
    of the candidate's file on the stack: the launch hook notes it, whatever spelled it."""
    import subprocess
    script = tmp_path / "hooked.py"
    script.write_text('''
import contextlib, torch, triton, triton.language as tl
from tools.sandbox import launches
notes = []
class Watch:
    armed, depth = False, 0
    def launch(self, run, fn, args, grid, kwargs):
        return run(fn, *args, grid=grid, warmup=False, **kwargs)
    def not_candidate(self): return contextlib.nullcontext()
    as_candidate = not_candidate
    def note(self, what): notes.append(what)
class Log:
    def attach(self): return lambda run, orig, fn, args, grid, kwargs: run(orig, fn, args, grid, kwargs)
class Worker:
    triton_off = compile_only = False
    pending = None
    watch, launch_log = Watch(), Log()
    def note_launch(self, fn, args, kwargs): pass
launches.hook_launches(Worker())
@triton.jit
def copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
x = torch.arange(8.0); y = torch.empty(8)
copy[(1,)](x, y, 8, BLOCK=8)
before = list(notes)
copy.add_pre_run_hook(lambda *a, **k: None)
copy[(1,)](x, y, 8, BLOCK=8)
print(before, notes)
''')
    import os
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": os.getcwd()})
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "[] ['the @triton.jit function copy has pre-run hooks (host code run at each launch)']"
