"""Block-by-block capture (tools/dialect/blocks.py): a graph larger than the capture's
block_ops is cut at module boundaries, equal blocks are compiled once, blocks may be
compiled by worker processes, and the joined module converts to one seed that runs in
lockstep with Model (tests/test_level3_seeds.py's check), stateful forwards included."""
from __future__ import annotations

import json
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest

from tools.dialect.blocks import block_plan, compile_blocks, module_path, split
from tools.dialect.inductor_capture import capture
from tools.dialect.kernelbook import accepted_seed
from tools.problem import build_model, load_problem, make_inputs

ROOT = Path(__file__).resolve().parents[1]
PROBLEMS = ROOT / "tests" / "problems" / "level3"


@lru_cache(maxsize=None)
def _graph(name: str):
    """Dynamo's graph of the problem's forward and its example inputs, as capture sees them."""
    import torch
    problem = load_problem(PROBLEMS / f"{name}.py")
    model = build_model(problem.module.Model, problem.module, 42, "cpu", "train")
    got = []

    def backend(gm, example_inputs):
        got.append((gm, list(example_inputs)))
        return gm.forward
    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(model, backend=backend, fullgraph=True)(*make_inputs(problem.module, 42, "cpu"))
    return got[0]


def _ops(gm) -> list:
    return [n for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module")]


@lru_cache(maxsize=None)
def _seed(name: str, block_ops: int) -> str:
    problem = load_problem(PROBLEMS / f"{name}.py")
    return accepted_seed(problem, capture(problem, "cpu", block_ops=block_ops))


def _lockstep(name: str, code: str, tmp_path: Path) -> list[float]:
    from tests.test_level3_seeds import lockstep_code_errors
    return lockstep_code_errors(code, PROBLEMS / f"{name}.py", tmp_path)


def test_a_graph_no_larger_than_block_ops_is_one_graph():
    gm, _ = _graph("repeated_blocks")
    assert block_plan(gm, len(_ops(gm))) is None and block_plan(gm, 0) is None


def test_blocks_are_cut_at_module_boundaries_in_graph_order():
    gm, _ = _graph("repeated_blocks")
    plan = block_plan(gm, 6)
    assert [n for block in plan for n in block] == _ops(gm) and max(map(len, plan)) <= 6
    owner = {}
    for i, block in enumerate(plan):
        for n in block:
            path = module_path(n)
            if path[:1] == ("blocks",):
                owner.setdefault(path[:2], set()).add(i)
    assert len(owner) == 4 and all(len(blocks) == 1 for blocks in owner.values())


def test_equal_blocks_are_compiled_once_and_a_wider_one_on_its_own():
    gm, inputs = _graph("repeated_blocks")
    plan = block_plan(gm, 6)
    cut = split(gm, inputs, plan)
    holding = {path: cut.names[i] for i, block in enumerate(plan) for n in block for path in [module_path(n)[:2]]}
    assert cut.same[holding[("blocks", "2")]] == holding[("blocks", "1")] != holding[("blocks", "2")]
    assert cut.same[holding[("wide",)]] == holding[("wide",)]
    assert len(set(cut.same.values())) < len(cut.names)


def test_a_seed_captured_block_by_block_matches_the_model_on_three_calls(tmp_path):
    assert max(_lockstep("repeated_blocks", _seed("repeated_blocks", 6), tmp_path)) < 1e-4


def test_a_seed_captured_block_by_block_has_one_call_and_no_kernel_twice_under_two_names():
    import ast
    code = _seed("repeated_blocks", 6)
    assert code.count("\ndef call(") == 1 and code != _seed("repeated_blocks", 0)
    bodies = [ast.unparse(ast.Module(body=f.body, type_ignores=[])) for f in ast.parse(code).body
              if isinstance(f, ast.FunctionDef) and any(ast.unparse(d) == "triton.jit" for d in f.decorator_list)]
    assert len(bodies) > 5 and len(set(bodies)) == len(bodies)


def test_a_stateful_forward_captured_block_by_block_carries_its_state(tmp_path):
    gm, _ = _graph("unrolled_rnn_state")
    assert block_plan(gm, 12) is not None and all(module_path(n) == () for n in _ops(gm)[:2])
    assert max(_lockstep("unrolled_rnn_state", _seed("unrolled_rnn_state", 12), tmp_path)) < 1e-4


def test_a_node_of_two_outputs_and_the_getitems_reading_it_are_in_one_block():
    import operator
    gm, _ = _graph("block_chunk_gate")
    for max_ops in range(1, len(_ops(gm))):
        plan = block_plan(gm, max_ops)
        where = {n: i for i, block in enumerate(plan) for n in block}
        assert sorted(where, key=_ops(gm).index) == _ops(gm)
        assert all(where[n] == where[n.args[0]] for n in _ops(gm) if n.target is operator.getitem)


@pytest.mark.parametrize("block_ops", [1, 2, 3])
def test_a_chunked_gate_captured_block_by_block_matches_the_model(block_ops, tmp_path):
    assert max(_lockstep("block_chunk_gate", _seed("block_chunk_gate", block_ops), tmp_path)) < 1e-5


def test_a_graph_reading_what_an_in_place_op_returns_is_compiled_whole(tmp_path):
    gm, _ = _graph("block_buffer_in_place")
    assert block_plan(gm, 2) is None
    assert max(_lockstep("block_buffer_in_place", _seed("block_buffer_in_place", 2), tmp_path)) < 1e-5


def test_a_failed_block_worker_is_named(monkeypatch):
    gm, inputs = _graph("repeated_blocks")
    monkeypatch.setenv("TORCHINDUCTOR_COMPILE_THREADS", "8")     # two processes

    def spawn(names, out):
        return subprocess.Popen([sys.executable, "-c", "import sys; print('kernelbook: no memory left', "
                                 "file=sys.stderr); sys.exit(1)"], stderr=subprocess.PIPE, text=True)
    with pytest.raises(ValueError, match="a block worker failed: no memory left"):   # this process's share compiles
        compile_blocks(gm, inputs, block_plan(gm, 6), lambda g, e: ("# an Inductor module", {}), None, spawn)


@pytest.mark.slow
def test_block_workers_give_the_same_seed_as_one_process(monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_COMPILE_THREADS", "8")     # blocks.block_jobs() == 2
    problem = load_problem(PROBLEMS / "repeated_blocks.py")
    assert accepted_seed(problem, capture(problem, "cpu", block_ops=6)) == _seed("repeated_blocks", 6)


def test_the_block_worker_command_needs_its_blocks(tmp_path):
    done = subprocess.run([sys.executable, "-m", "tools.dialect", "blocks", str(PROBLEMS / "repeated_blocks.py"),
                           "--device", "cpu", "--out", str(tmp_path / "o.json")],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 2 and "blocks needs --names" in done.stderr


GPU_BLOCKS = """
import json, sys, importlib.util
import torch
from tools.dialect.inductor_capture import capture
from tools.dialect.kernelbook import accepted_seed
from tools.problem import load_problem
path, block_ops = sys.argv[1], int(sys.argv[3])
code = accepted_seed(load_problem(path), capture(load_problem(path), "cuda", block_ops=block_ops))
open(sys.argv[2], "w").write(code)
spec = importlib.util.spec_from_file_location("seed", sys.argv[2])
seed = importlib.util.module_from_spec(spec); spec.loader.exec_module(seed)
spec = importlib.util.spec_from_file_location("problem", path)
problem = importlib.util.module_from_spec(spec); spec.loader.exec_module(problem)
torch.backends.cudnn.allow_tf32 = False; torch.backends.cuda.matmul.allow_tf32 = False
torch.manual_seed(0); model = problem.Model(*problem.get_init_inputs()).cuda()
torch.manual_seed(0); new = seed.ModelNew(*problem.get_init_inputs()).cuda()
errors = []
with torch.no_grad():
    for call in range(3):
        torch.manual_seed(1 + call); inputs = [x.cuda() for x in problem.get_inputs()]
        errors.append((new(*inputs) - model(*inputs)).abs().max().item())
print(json.dumps(errors))
"""


@pytest.mark.gpu
@pytest.mark.parametrize("name,block_ops", [("repeated_blocks", 6), ("unrolled_rnn_state", 12)])
def test_on_a_gpu_a_seed_captured_block_by_block_matches_the_model(name, block_ops, tmp_path):
    done = subprocess.run([sys.executable, "-c", GPU_BLOCKS, str(PROBLEMS / f"{name}.py"), str(tmp_path / "seed.py"),
                           str(block_ops)], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert max(json.loads(done.stdout.strip().splitlines()[-1])) < 1e-4


def test_a_blocks_configs_are_read_from_its_own_loaded_module_not_another_blocks_of_the_same_kernel_names(
        tmp_path, monkeypatch):
    import types

    from torch._inductor.codecache import PyCodeCache

    from tools.dialect.inductor_capture import _chosen_configs
    code = "triton_poi_fused_0 = async_compile.triton('triton_poi_fused_0', '''...''')\n"

    def loaded(text: str, xblock: int):
        path = tmp_path / f"m{xblock}.py"
        path.write_text(text, encoding="utf-8")
        config = types.SimpleNamespace(kwargs={"XBLOCK": xblock}, num_warps=4, num_stages=1)
        kernel = types.SimpleNamespace(launchers=[types.SimpleNamespace(config=config)])
        return types.SimpleNamespace(__file__=str(path), triton_poi_fused_0=kernel)
    mine, later = loaded(code, 128), loaded(code + "# another block\n", 1024)
    monkeypatch.setattr(PyCodeCache, "modules", [mine, later])
    assert _chosen_configs(code, exact=True)["triton_poi_fused_0"]["XBLOCK"] == 128
    assert _chosen_configs("# not loaded\n" + code, exact=True) == {}


def test_kernels_are_renamed_at_once_so_a_new_name_that_is_another_kernels_old_one_is_not_renamed_again():
    from tools.dialect.blocks import _rename_all
    code = "k_1.run(a)\nk_0.run(b)\nk_0_x = 1\n"
    assert _rename_all(code, {"k_1": "k_0", "k_0": "k_0_b2"}) == "k_0.run(a)\nk_0_b2.run(b)\nk_0_x = 1\n"


def _launched_sources(module: str) -> list[str]:
    """The code of each kernel the joined module's call() launches, in order, names left out."""
    import ast

    from tools.dialect.blocks import _kernel_sources, _renamed
    sources = {k: _renamed(src, k, "KERNEL") for k, src in _kernel_sources(module).items()}
    call = next(f for f in ast.parse(module).body if isinstance(f, ast.FunctionDef) and f.name == "call")
    return [sources[n.func.value.id] for n in ast.walk(call) if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute) and n.func.attr == "run" and isinstance(n.func.value, ast.Name)]


def test_joined_blocks_launch_the_same_kernels_when_a_block_names_two_shared_kernels_each_others_names():
    from tools.dialect.blocks import _kernel_sources, _rename_all, _renamed, stitch
    gm, inputs = _graph("repeated_blocks")
    cut = split(gm, inputs, block_plan(gm, 6))
    distinct = list(dict.fromkeys(cut.same.values()))
    problem = load_problem(PROBLEMS / "repeated_blocks.py")
    codes = {n: c for n, (c, _) in capture(problem, "cpu", block_ops=6, only=distinct).items()}
    plain = _launched_sources(stitch(cut, codes, {})[0])
    # the second block's two kernels that the first block also has, each named as the first
    # block names the other: joining must swap them back, not rename one twice
    first = {_renamed(src, k, "K"): k for k, src in _kernel_sources(codes[distinct[0]]).items()}
    second = _kernel_sources(codes[distinct[1]])
    (k1, t1), (k2, t2) = [(k, first[_renamed(src, k, "K")]) for k, src in second.items()
                          if _renamed(src, k, "K") in first][:2]
    assert not {t1, t2} & set(second)
    codes[distinct[1]] = _rename_all(codes[distinct[1]], {k1: t2, k2: t1})
    assert len(plain) > 10 and _launched_sources(stitch(cut, codes, {})[0]) == plain
