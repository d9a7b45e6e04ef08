"""Problem and candidate loading: every malformed file is one BadInput naming it."""
from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from tools.errors import BadInput
from tools.problem import load_candidate, load_problem, make_inputs, split_init

HERE = Path(__file__).parent
GOOD = (HERE / "problems" / "relu.py").read_text()


def write(tmp_path, text, name="p.py", mode="w"):
    p = tmp_path / name
    if mode == "wb":
        p.write_bytes(text)
    else:
        p.write_text(text)
    return p


def fault(path) -> str:
    with pytest.raises(BadInput) as e:
        load_problem(path)
    msg = str(e.value)
    assert "\n" not in msg and str(path) in msg
    return msg


def test_good_problem_loads():
    p = load_problem(HERE / "problems" / "relu.py")
    assert p.name == "relu" and p.n_inputs == 1 and p.init_form == "flat"


_CONFIG = """{future}from dataclasses import dataclass
import torch
import torch.nn as nn


@dataclass
class Config:
    d: int = 4


def annotated(x: int) -> int:
    return x


class Model(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.lin = nn.Linear(cfg.d, cfg.d)

    def forward(self, x):
        return self.lin(x)


def get_inputs():
    return [torch.randn(2, 4)]


def get_init_inputs():
    return [Config()]
"""


@pytest.mark.parametrize("future", ["", "from __future__ import annotations\n"], ids=["plain", "future_annotations"])
def test_a_problem_whose_init_input_is_a_dataclass_loads(tmp_path, future):
    # a @dataclass with string annotations looks its module up in sys.modules while the class is made
    p = load_problem(write(tmp_path, _CONFIG.replace("{future}", future)))
    assert p.n_inputs == 1


def test_a_problem_is_compiled_without_krefines_own_future_flags(tmp_path):
    # tools/problem.py has `from __future__ import annotations`; the problem's annotations stay types
    from tools.problem import exec_module
    path = write(tmp_path, _CONFIG.replace("{future}", ""))
    assert exec_module(path, path.read_text()).annotated.__annotations__["x"] is int


def test_a_problem_module_is_not_left_in_sys_modules(tmp_path):
    import sys
    from tools.problem import exec_module
    path = write(tmp_path, _CONFIG.replace("{future}", ""))
    mod = exec_module(path, path.read_text())
    assert mod.__name__ not in sys.modules and mod.Config().d == 4


def test_an_argparse_at_import_reads_the_problems_own_command_line_not_krefines(tmp_path):
    src = GOOD.replace("import torch\n", "import argparse\nimport torch\n"
                       "args = argparse.ArgumentParser().parse_args()\n", 1)
    assert load_problem(write(tmp_path, src)).n_inputs == 1


def test_get_inputs_that_moves_its_tensors_to_a_device_loads(tmp_path):
    # `.to(device)` copies data, which a meta tensor does not hold: the check runs it on the cpu
    src = _DEVICE.format(model=GOOD[GOOD.index("class Model"):GOOD.index("def get_inputs")])
    assert load_problem(write(tmp_path, src)).n_inputs == 1


_DEVICE = """import torch
import torch.nn as nn
device = "cuda" if torch.cuda.is_available() else "cpu"


{model}
def get_inputs():
    return [torch.randn(4, 8).to(device)]


def get_init_inputs():
    return []
"""


def test_a_model_whose_constructor_raises_is_bad_input_naming_it(tmp_path):
    src = GOOD.replace("super().__init__()", "super().__init__()\n        raise ValueError('n must be even')", 1)
    assert "Model(*get_init_inputs()) raised ValueError: n must be even" in fault(write(tmp_path, src))


def test_importable_takes_out_only_the_problems_module(tmp_path):
    import sys
    from tools.problem import exec_module, importable
    path = write(tmp_path, _CONFIG.replace("{future}", ""))
    mod = exec_module(path, path.read_text())
    with importable(mod):
        assert sys.modules[mod.__name__] is mod
        sys.modules["krefine_test_imported_meanwhile"] = mod
    assert mod.__name__ not in sys.modules and sys.modules.pop("krefine_test_imported_meanwhile") is mod


def test_missing_file_is_bad_input(tmp_path):
    assert "does not exist" in fault(tmp_path / "nope.py")


def test_directory_is_bad_input(tmp_path):
    assert "not a file" in fault(tmp_path)


def test_empty_file_is_bad_input(tmp_path):
    assert "empty" in fault(write(tmp_path, "  \n"))


def test_binary_file_is_bad_input(tmp_path):
    assert "binary" in fault(write(tmp_path, b"\x7fELF\x00\x01", mode="wb"))


def test_non_utf8_file_is_bad_input(tmp_path):
    assert "UTF-8" in fault(write(tmp_path, b"x = '\xff\xfe'\n", mode="wb"))


def test_syntax_error_names_line(tmp_path):
    assert "line 2" in fault(write(tmp_path, "import torch\ndef f(:\n"))


def test_missing_model_is_bad_input(tmp_path):
    assert "no Model" in fault(write(tmp_path, GOOD.replace("class Model", "class Other")))


def test_model_not_a_module_is_bad_input(tmp_path):
    src = GOOD.replace("class Model(nn.Module):", "class Model:").replace("super().__init__()", "pass")
    assert "nn.Module" in fault(write(tmp_path, src))


def test_get_inputs_raising_is_bad_input(tmp_path):
    src = GOOD.replace("return [torch.randn(16, 1000)]", "raise ValueError('boom')")
    assert "get_inputs() raised ValueError: boom" in fault(write(tmp_path, src))


def test_get_inputs_taking_arguments_is_bad_input(tmp_path):
    assert "must take no arguments" in fault(write(tmp_path, GOOD.replace("def get_inputs():", "def get_inputs(n):")))


def test_forward_arity_mismatch_is_bad_input(tmp_path):
    src = GOOD.replace("return [torch.randn(16, 1000)]", "return [torch.randn(4), torch.randn(4)]")
    assert "Model.forward(*get_inputs())" in fault(write(tmp_path, src))


def test_init_arity_mismatch_is_bad_input(tmp_path):
    src = GOOD.replace("def get_init_inputs():\n    return []", "def get_init_inputs():\n    return [3]")
    assert "Model(*get_init_inputs())" in fault(write(tmp_path, src))


def test_get_inputs_returning_tensor_not_list_is_bad_input(tmp_path):
    src = GOOD.replace("return [torch.randn(16, 1000)]", "return torch.randn(16, 1000)")
    assert "expected a list" in fault(write(tmp_path, src))


def test_import_error_in_problem_is_bad_input(tmp_path):
    assert "ModuleNotFoundError" in fault(write(tmp_path, "import not_a_module_xyz\n" + GOOD))


def test_kernelbook_args_kwargs_init_form_is_accepted(tmp_path):
    src = GOOD.replace("def __init__(self):", "def __init__(self, scale, bias=0.0):").replace(
        "def get_init_inputs():\n    return []", "def get_init_inputs():\n    return [[2.0], {'bias': 1.0}]")
    p = load_problem(write(tmp_path, src))
    assert p.init_form == "args_kwargs"
    assert split_init([[2.0], {"bias": 1.0}]) == ([2.0], {"bias": 1.0})


def test_huge_inputs_load_without_allocating(tmp_path):
    src = GOOD.replace("torch.randn(16, 1000)", "torch.randn(1 << 16, 1 << 16)")  # 16 GiB if real
    t = time.monotonic()
    load_problem(write(tmp_path, src))
    assert time.monotonic() - t < 5.0


def test_inputs_are_reproducible_from_seed():
    p = load_problem(HERE / "problems" / "relu.py")
    a, b = make_inputs(p.module, 7, "cpu"), make_inputs(p.module, 7, "cpu")
    c = make_inputs(p.module, 8, "cpu")
    assert a[0].equal(b[0]) and not a[0].equal(c[0])


LAYOUTS = """
import torch, torch.nn as nn
class Model(nn.Module):
    def forward(self, a, b, c, d):
        return a.sum() + b.sum() + c.sum() + d.sum()
def get_inputs():
    return [torch.randn(1, 5).expand(3, 5), torch.randn(6, 22)[:, ::2], torch.randn(4, 5).t(),
            torch.randn(2, 3, 4, 4).to(memory_format=torch.channels_last)]
def get_init_inputs(): return []
"""


def test_inputs_are_laid_out_as_kernelbenchs_copy_to_the_device_lays_them_out(tmp_path):
    """An expanded or strided-slice input becomes contiguous, as `x.cuda()` makes it in
    KernelBench's harness (a seed captured on the stride-0 layout failed there); a transpose
    and a channels-last input keep their strides."""
    p = load_problem(write(tmp_path, LAYOUTS))
    got = make_inputs(p.module, 0, "cpu")
    want = [x.to("cpu", copy=True) for x in seeded_inputs(p.module, 0)]
    assert [g.stride() for g in got] == [w.stride() for w in want] == [(5, 1), (11, 1), (1, 5), (48, 1, 12, 3)]
    assert all(g.equal(w) for g, w in zip(got, want))


def seeded_inputs(mod, seed):
    from tools.problem import seeded
    return seeded(mod.get_inputs, seed)


def test_inputs_made_from_many_threads_at_once_match_their_seeds():
    """A judge makes references for several candidates at once (regression: a shared
    generator reseeded by another thread gave a reference on the wrong inputs)."""
    import threading
    import torch
    mod = load_problem(HERE / "problems" / "relu.py").module
    seeds = range(100, 106)
    expected = {s: make_inputs(mod, s, "cpu")[0] for s in seeds}
    wrong = []

    def draw(seed: int) -> None:
        for _ in range(100):
            if not torch.equal(make_inputs(mod, seed, "cpu")[0], expected[seed]):
                wrong.append(seed)
    threads = [threading.Thread(target=draw, args=(s,)) for s in seeds]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []


def test_candidate_without_modelnew_is_bad_input(tmp_path):
    with pytest.raises(BadInput, match="no ModelNew"):
        load_candidate(write(tmp_path, "import torch\nclass Model: pass\n", "c.py"))


def test_candidate_syntax_error_is_bad_input(tmp_path):
    with pytest.raises(BadInput, match="not valid Python"):
        load_candidate(write(tmp_path, "class ModelNew(:\n", "c.py"))


KB = Path(os.environ.get("KREFINE_KERNELBENCH", Path(__file__).resolve().parents[2] / "kb")) / "KernelBench"


@pytest.mark.skipif(not KB.is_dir(), reason="no KernelBench checkout (set KREFINE_KERNELBENCH)")
@pytest.mark.parametrize("level", ["level1", "level2", "level3"])
def test_every_kernelbench_problem_loads_unchanged(level):
    files = sorted((KB / level).glob("*.py"))
    assert files
    failures = []
    for f in files:
        try:
            load_problem(f)
        except BadInput as e:
            failures.append(str(e))
    assert not failures, failures


def test_model_without_forward_is_bad_input(tmp_path):
    src = GOOD.replace("    def forward(self, x):\n        return torch.relu(x)\n", "    pass\n")
    assert src != GOOD
    assert "defines no forward" in fault(write(tmp_path, src))


# --- faults of the problem's own code that show only when the judge runs it ----------

OK_CANDIDATE = (HERE / "problems" / "relu_ok.py").read_text()


def judge_fault(path) -> str:
    from tools.judge import evaluate
    with pytest.raises(BadInput) as e:
        evaluate(load_problem(path), OK_CANDIDATE, device="cpu", profile=False)
    msg = str(e.value)
    assert "\n" not in msg and str(path) in msg
    return msg


def test_model_constructor_raising_is_bad_input(tmp_path):
    src = GOOD.replace("        super().__init__()\n", "        super().__init__()\n        raise ValueError('no weights')\n")
    assert src != GOOD
    assert "Model(*get_init_inputs()) raised ValueError: no weights" in judge_fault(write(tmp_path, src))


def test_reference_forward_raising_is_bad_input(tmp_path):
    src = GOOD.replace("return torch.relu(x)", "raise RuntimeError('broken reference')")
    assert "raised RuntimeError: broken reference" in judge_fault(write(tmp_path, src))


@pytest.mark.parametrize("ret, shown", [("3.0", "float"), ("[x.relu(), 1]", "list of Tensor, int"),
                                        ("None", "NoneType"), ("()", "tuple of nothing")])
def test_reference_forward_returning_no_tensor_is_bad_input(tmp_path, ret, shown):
    src = GOOD.replace("return torch.relu(x)", f"return {ret}")
    assert f"Model.forward returned {shown}; expected a tensor" in judge_fault(write(tmp_path, src))


@pytest.mark.parametrize("ret, shown", [("{'y': x}", "dict"), ("(x, None)", "tuple of Tensor, NoneType")])
def test_a_forward_returning_no_tensor_is_bad_input_at_load_before_any_judge(tmp_path, ret, shown):
    src = GOOD.replace("return torch.relu(x)", f"return {ret}")
    with pytest.raises(BadInput, match=re.escape(f"Model.forward returned {shown}; expected a tensor")):
        load_problem(write(tmp_path, src))


def test_strict_fp32_turns_tf32_off_inside_and_restores_the_flags_after():
    import torch
    from tools.problem import strict_fp32
    before = (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = True          # as a user's script may set it
    try:
        with strict_fp32():
            inside = (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)
        assert inside == (False, False)
        assert (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32) == (before[0], True)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before[1]


def test_strict_fp32_after_a_mix_of_torchs_precision_apis_sets_each_backend_to_ieee():
    import torch
    from tools.problem import strict_fp32
    cudnn, matmul = torch.backends.cudnn, torch.backends.cuda.matmul
    before = (cudnn.conv.fp32_precision, cudnn.rnn.fp32_precision, matmul.fp32_precision)
    cudnn.conv.fp32_precision = "ieee"           # conv and rnn differ: the legacy getter raises
    try:
        with strict_fp32():
            assert (cudnn.conv.fp32_precision, cudnn.rnn.fp32_precision, matmul.fp32_precision) == ("ieee",) * 3
        assert (cudnn.conv.fp32_precision, cudnn.rnn.fp32_precision) == ("ieee", before[1])
    finally:
        cudnn.conv.fp32_precision, cudnn.rnn.fp32_precision, matmul.fp32_precision = before


def test_the_strict_reference_forward_runs_without_tf32(tmp_path):
    import torch
    from tools.judge.reference import compute_reference
    from tools.problem import build_model
    p = write(tmp_path, "import torch\n\nclass Model(torch.nn.Module):\n"
                        "    def forward(self, x):\n"
                        "        return x + float(torch.backends.cudnn.allow_tf32)\n\n"
                        "def get_inputs():\n    return [torch.zeros(4)]\n\n"
                        "def get_init_inputs():\n    return []\n")
    prob = load_problem(p)
    model = build_model(prob.module.Model, prob.module, 42, "cpu")
    [out] = compute_reference(model, prob.module, 1, "cpu", init_seed=42, precision="strict")
    assert torch.backends.cudnn.allow_tf32 and out.tolist() == [0.0] * 4


def test_strict_fp32_waits_while_another_thread_times_with_the_users_flags():
    import threading
    import torch
    from tools.problem import as_the_user_has_it, strict_fp32
    seen, timing = [], threading.Event()

    def reference():
        timing.wait()
        with strict_fp32():
            seen.append("reference")
    t = threading.Thread(target=reference)
    t.start()
    with as_the_user_has_it():
        timing.set()
        t.join(timeout=0.3)             # the reference may not start while eager is timed
        seen.append(("timed", torch.backends.cudnn.allow_tf32))
    t.join()
    assert seen == [("timed", torch.backends.cudnn.allow_tf32), "reference"]


def test_a_model_torch_refuses_to_build_is_one_bad_input_naming_the_error(tmp_path):
    """nn.ModuleDict({"items": ...}): torch's own code raises inside Model.__init__ (a name
    nn.ModuleDict holds); the seeder printed torch's traceback and exited 1."""
    src = GOOD.replace("super().__init__()", 'super().__init__()\n        self.d = nn.ModuleDict({"items": nn.ReLU()})')
    assert 'nn.ModuleDict({"items"' in src
    said = fault(write(tmp_path, src))
    assert "Model(*get_init_inputs()) raised KeyError" in said and "attribute 'items' already exists" in said


SET_UP_STATE = """
import functools
import torch, torch.nn as nn
BUILT = 0
@functools.lru_cache
def table(n):
    return torch.arange(n, dtype=torch.float32)
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        global BUILT
        BUILT += 1
        self.order = BUILT
        self.register_buffer("t", table(4).clone())
    def forward(self, x):
        return x + self.t
def get_inputs(): return [torch.randn(2, 4)]
def get_init_inputs(): return []
"""


def test_the_loaded_module_has_never_built_model_so_set_up_caches_and_counters_start_fresh(tmp_path):
    """load_problem builds Model on the meta device to check it: a set-up lru_cache kept a meta
    tensor (the seeder then crashed copying out of it) and a global counter was already 1 (a
    layer id baked into the seed as the second model's)."""
    mod = load_problem(write(tmp_path, SET_UP_STATE)).module
    model = mod.Model()
    assert model.order == 1 and model.t.device.type == "cpu" and model.t.tolist() == [0.0, 1.0, 2.0, 3.0]


@pytest.mark.parametrize("call", ["import sys; sys.exit(0)", "import os; os._exit(0)"])
def test_a_problem_that_exits_at_import_is_bad_input_not_the_end_of_krefine(tmp_path, call):
    with pytest.raises(BadInput, match=r"problem file called exit\(\) or os\._exit\(\) at import"):
        load_problem(write(tmp_path, GOOD + "\n" + call + "\n"))
    assert callable(os._exit) and os._exit.__module__ == "posix"   # put back


@pytest.mark.parametrize("made, fault", [("torch.randn(8, 8).to_sparse()", "a tensor of layout torch.sparse_coo"),
                                         ("torch.randn(8, 8, device='meta')", "a tensor on the meta device")])
def test_inputs_krefine_cannot_judge_are_named_as_what_get_inputs_returned(tmp_path, made, fault):
    from tools.problem import make_inputs
    src = GOOD.replace("return [torch.randn(", f"return [{made}] or [torch.randn(", 1)
    assert src != GOOD
    path = write(tmp_path, src)
    with pytest.raises(BadInput, match=re.escape(f"get_inputs() returned {fault}")):
        make_inputs(load_problem(path).module, 0, "cpu")


DEEP = "x = " + "+".join(["1"] * 100_000) + "\nclass ModelNew: pass\n"   # past any recursion limit Inductor sets


def test_a_candidate_nested_too_deeply_for_the_parser_is_not_valid_python(tmp_path):
    with pytest.raises(BadInput, match="nested too deeply"):
        load_candidate(write(tmp_path, DEEP, "c.py"))


# 100,000 fails the parse; 2,500 parses at the limit torch.compile leaves (2,000), and the guards' walks fail
@pytest.mark.parametrize("depth", [100_000, 2500])
def test_the_judge_gives_a_too_deeply_nested_candidate_compile_error_not_an_internal_error(depth):
    import sys
    from tools.judge.static import static_verdict
    from tools.settings import EvalSettings
    from tools.verdict import Status
    src = "x = " + "+".join(["1"] * depth) + "\nclass ModelNew: pass\n"
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(2000)   # as torch.compile leaves it in a long-lived judge
    try:
        v = static_verdict(src, "c.py", EvalSettings(), "cpu", 0)
    finally:
        sys.setrecursionlimit(before)
    assert v.status is Status.COMPILE_ERROR and "nested too deeply" in v.diagnostics[0].message


def test_a_problem_nested_too_deeply_for_the_parser_is_bad_input(tmp_path):
    with pytest.raises(BadInput, match="nested too deeply"):
        load_problem(write(tmp_path, GOOD + "\ny = " + "-" * 200000 + "1\n"))


def test_a_byte_order_mark_and_a_coding_declaration_read_as_python_reads_them(tmp_path):
    bom = tmp_path / "bom.py"
    bom.write_bytes(b"\xef\xbb\xbf" + GOOD.encode())
    latin = tmp_path / "latin.py"
    latin.write_bytes(b"# -*- coding: latin-1 -*-\n# caf\xe9\n" + GOOD.encode())
    assert load_problem(bom).n_inputs == 1 and load_problem(latin).n_inputs == 1


def test_a_source_file_past_the_size_cap_is_refused_before_it_is_read(tmp_path):
    big = tmp_path / "big.py"
    with big.open("wb") as f:
        f.truncate(1 << 40)   # sparse: a TiB that would exhaust memory if read
    with pytest.raises(BadInput, match="MiB"):
        load_candidate(big)


def test_a_candidate_that_is_a_symbolic_link_loop_is_named_so(tmp_path):
    (tmp_path / "a.py").symlink_to(tmp_path / "b.py")
    (tmp_path / "b.py").symlink_to(tmp_path / "a.py")
    with pytest.raises(BadInput, match="Too many levels of symbolic links"):
        load_candidate(tmp_path / "a.py")


def test_a_problem_that_moves_torchs_default_device_at_import_is_bad_input_and_undone(tmp_path):
    import torch
    with pytest.raises(BadInput, match="default device to meta"):
        load_problem(write(tmp_path, 'import torch\ntorch.set_default_device("meta")\n' + GOOD))
    assert torch.get_default_device().type == "cpu"
