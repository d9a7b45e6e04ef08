"""A forward's counter increments in one launch (tools/dialect/counters.py, tools/kernels/counters.py):
a training-mode BatchNorm's `num_batches_tracked += 1`, which Inductor writes as a launch each, is
one `add_one([...])` for every 16 counters in the seed.

The converter tests read a capture recorded on cpu (tests/fixtures/inductor_level3/
cpu_batchnorm_counters.py: `python -m tools.dialect capture PROBLEM --device cpu`).
"""
from __future__ import annotations

import functools

import pytest

from tests.kernel_cases import compile_for_sm90
from tests.test_gemm_epilogue import _call, _post_grad_graph, _targets
from tests.test_level3_seeds import _seed


def _bn_net(n: int):
    import torch
    layers = []
    for _ in range(n):
        layers += [torch.nn.Conv2d(4, 4, 1), torch.nn.BatchNorm2d(4)]
    return torch.nn.Sequential(*layers)


def test_the_batch_norms_counters_are_one_call_at_the_end_of_the_graph():
    import torch
    from tools.dialect.counters import counter_pass
    graph = _post_grad_graph(_bn_net(3), torch.randn(2, 4, 3, 3))
    assert counter_pass(graph) == 3
    targets = _targets(graph)
    assert targets.count("krefine.add_one_.default") == 1 and targets.count("aten.copy_.default") == 6
    bump = next(n for n in graph.nodes if str(n.target) == "krefine.add_one_.default")
    assert [a.op for a in bump.args[0]] == ["placeholder"] * 3 and bump.next.op == "output"


def test_a_single_counter_is_left_to_inductor():
    import torch
    from tools.dialect.counters import counter_pass
    assert counter_pass(_post_grad_graph(_bn_net(1), torch.randn(2, 4, 3, 3))) == 0


def test_a_float_buffer_incremented_by_one_is_no_counter():
    import torch
    from tools.dialect.counters import counter_pass

    class Steps(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("a", torch.zeros(()))
            self.register_buffer("b", torch.zeros(()))

        def forward(self, x):
            self.a.add_(1)
            self.b.add_(1)
            return x * 2

    assert counter_pass(_post_grad_graph(Steps(), torch.randn(3))) == 0


def test_the_seed_adds_one_to_both_counters_in_one_launch():
    call = _call(_seed("batchnorm_counters"))
    assert "add_one([arg2_1, arg8_1])" in call and "add_copy" not in call


def judged_seed(name: str, tmp_path) -> dict:
    """`krefine eval` of tests/problems/level3/NAME.py's seed (from its cpu capture) on cpu: the verdict."""
    import json
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    (tmp_path / "seed.py").write_text(_seed(name))
    done = subprocess.run([sys.executable, "-m", "agent.cli", "eval", str(root / f"tests/problems/level3/{name}.py"),
                           str(tmp_path / "seed.py"), "--device", "cpu", "--json", "--no-profile", "--keep-judge", "0"],
                          cwd=root, capture_output=True, text=True, timeout=600)
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_the_seed_keeps_the_model_s_state_under_the_judge(tmp_path):
    verdict = judged_seed("batchnorm_counters", tmp_path)
    assert verdict["verdict"] == "correct", verdict.get("diagnostics")
    assert "f.1.num_batches_tracked" in verdict["checks"]["module_state"]["examples"]


# add_one in Triton's interpreter (set before triton is imported: a child process), each launch's N noted
ADD_ONE = """
import json, sys, torch
import tools.kernels.counters as counters
seen, real = [], counters.add_one_kernel
class Noted:
    def __getitem__(self, grid):
        return lambda *a, **k: seen.append(k["N"]) or real[grid](*a, **k)
counters.add_one_kernel = Noted()
out = {}
for n in map(int, sys.argv[1:]):
    seen.clear()
    cs = [torch.tensor(i, dtype=torch.long) for i in range(n)]
    counters.add_one(cs)
    out[n] = [[int(c) for c in cs], list(seen)]
print(json.dumps(out))
"""
SIZES = (1, 16, 17, 35)


@functools.lru_cache(maxsize=None)
def _add_one_results() -> dict:
    """{n: (counters after add_one, each launch's N)} for every n of SIZES, from one child."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path
    done = subprocess.run([sys.executable, "-c", ADD_ONE, *map(str, SIZES)], cwd=Path(__file__).resolve().parents[1],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "TRITON_INTERPRET": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    return {int(n): v for n, v in json.loads(done.stdout.strip().splitlines()[-1]).items()}


@pytest.mark.parametrize("n", SIZES)
def test_add_one_adds_one_to_every_counter_in_launches_of_16(n):
    values, launches = _add_one_results()[n]
    assert values == list(range(1, n + 1))
    assert launches == [16] * (n // 16) + ([n % 16] if n % 16 else [])


@pytest.mark.slow
def test_the_counter_kernel_compiles_for_sm90():
    import tools.kernels.counters as counters
    sig = {**{f"p{i}": "*i64" for i in range(16)}, "N": "constexpr"}
    assert compile_for_sm90(counters.add_one_kernel, sig, {"N": 5}, num_warps=1).asm["ptx"]
