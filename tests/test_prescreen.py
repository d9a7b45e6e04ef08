"""tools/judge/prescreen.py and the sweep's use of it (agent/loop/sweep_plan.py): many
variants checked on one input and timed in one worker; only right ones reach the judge."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from agent.search.sweep import Variant
from agent.loop.sweep_plan import _prescreen
from tools.judge.prescreen import CORRECT, FAILED, INCORRECT, Screen, prescreen
from tools.settings import EvalSettings, TrialSettings

PROBLEM = '''\
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2.0


def get_inputs():
    return [torch.randn(1000)]


def get_init_inputs():
    return []
'''

GOOD = '''\
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=m), 0.0) * 2.0, mask=m)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        k[(triton.cdiv(n, 256),)](x, y, n, BLOCK=256)
        return y
'''
WRONG = GOOD.replace("* 2.0, mask=m", "* 3.0, mask=m")
RAISES = GOOD.replace("y = torch.empty_like(x)", "raise RuntimeError('boom')")
DIES = GOOD.replace("y = torch.empty_like(x)", "import os; os._exit(7)")
# right on the first call only: later calls hand back the first output
FIRST_CALL_ONLY = GOOD.replace("    def forward(self, x):\n        y = torch.empty_like(x)",
                               "    def forward(self, x):\n        if hasattr(self, 'kept'):\n"
                               "            return self.kept\n        y = torch.empty_like(x)").replace(
                               "        return y\n", "        self.kept = y\n        return y\n")


@pytest.fixture
def problem(tmp_path) -> Path:
    p = tmp_path / "relu2.py"
    p.write_text(PROBLEM)
    return p


def test_each_variant_gets_its_own_status_and_a_dying_worker_is_replaced(problem):
    screens = prescreen(problem, [GOOD, WRONG, RAISES, DIES, GOOD], device="cpu", settings=TrialSettings(), seed=7)
    assert [s.status for s in screens] == [CORRECT, INCORRECT, FAILED, FAILED, CORRECT]
    assert "boom" in screens[2].error and "exited (7)" in screens[3].error


def test_right_on_the_prescreen_input_but_wrong_on_the_trials_is_judged_incorrect(problem):
    from tools.judge.session import Judge
    from tools.problem import load_problem
    [screen] = prescreen(problem, [FIRST_CALL_ONLY], device="cpu", settings=TrialSettings(), seed=7)
    assert screen.status == CORRECT
    with Judge(load_problem(problem), device="cpu", settings=EvalSettings()) as judge:
        verdict = judge.judge(FIRST_CALL_ONLY)
    assert not verdict.correct


def test_a_variant_whose_answer_is_rounding_noise_is_checked_against_the_float64_forward():
    root = Path(__file__).parent / "exploits"
    sources = [(root / f"{name}.py").read_text() for name in ("ok_noise_reference", "noise_reference_offset")]
    screens = prescreen(root / "problems" / "centered_mean.py", sources, device="cpu", settings=TrialSettings(),
                        seed=7)
    assert [s.status for s in screens] == [CORRECT, INCORRECT]


def _ctx(tmp_path, screens):
    from agent.loop.run import Run
    from agent.loop.rundir import RunDir
    run = Run.create(RunDir(tmp_path), {})
    run.generated("r00-c00", parent=None, origin="inductor_seed", code=GOOD)
    judges = SimpleNamespace(prescreen=lambda sources, reps: screens[:len(sources)])
    return SimpleNamespace(run=run, judges=judges, progress=SimpleNamespace(note=lambda text: None),
                           config=SimpleNamespace(search=SimpleNamespace(prescreen_reps=3)))


def test_a_variant_wrong_on_the_prescreen_never_reaches_the_judge(tmp_path):
    variants = [Variant(f"# {i}\n" + GOOD, f"change {i}") for i in range(3)]
    screens = [Screen(0, CORRECT, ms=2.0), Screen(1, INCORRECT, error="max abs error 1"),
               Screen(2, CORRECT, ms=1.5), Screen(3, FAILED, error="boom")]
    chosen = _prescreen(_ctx(tmp_path, screens), {"round": 0}, "r00-c00", variants, limit=3)
    assert [v.source for v in chosen] == [variants[1].source]          # the only right one
    assert "pre-screen 1.5 vs 2 ms" in chosen[0].change


def test_the_fastest_right_variants_go_first_and_the_results_are_kept(tmp_path):
    from tools.jsonio import read_json
    variants = [Variant(f"# {i}\n" + GOOD, f"change {i}") for i in range(3)]
    screens = [Screen(0, CORRECT, ms=2.0), Screen(1, CORRECT, ms=3.0), Screen(2, CORRECT, ms=1.0),
               Screen(3, CORRECT, ms=1.5)]
    chosen = _prescreen(_ctx(tmp_path, screens), {"round": 0}, "r00-c00", variants, limit=2)
    assert [v.source for v in chosen] == [variants[1].source, variants[2].source]
    kept = read_json(tmp_path / "prescreen" / "r00-c00.json")
    assert len(kept["variants"]) == 3 and [c["source"] for c in kept["chosen"]] == [v.source for v in chosen]


# ---------------------------------------------------------------- the compile pass

# relu(x) * 2 twice: relu(x) * 4, wrong (two launches of k, BLOCK 256 and 128)
TWO_KERNELS = GOOD.replace("        return y\n", "        z = torch.empty_like(y)\n"
                           "        k[(triton.cdiv(n, 128),)](y, z, n, BLOCK=128)\n        return z\n")


def _precompile_rows(tmp_path, sources: list[str]) -> list[dict]:
    import os

    from tools.judge.precompile import precompile
    (tmp_path / "problem.py").write_text(PROBLEM)
    files = []
    for i, src in enumerate(sources):
        files.append(str(tmp_path / f"v{i}.py"))
        Path(files[-1]).write_text(src)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(TRITON_CACHE_DIR=str(tmp_path / "triton-cache"), PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    return precompile({"problem": str(tmp_path / "problem.py"), "init_seed": 0, "module_mode": "train"},
                      files, env, jobs=2, timeout_s=120)


def test_the_compile_pass_reaches_every_launch_of_each_variant_without_running_it(tmp_path):
    """Each child runs a variant's forward on meta tensors with Triton's launch replaced by
    its warm-up: every launch is reached (on this machine without a GPU driver each compile
    fails, which the child reports and goes on from), none runs."""
    rows = _precompile_rows(tmp_path, [GOOD, TWO_KERNELS, RAISES])
    assert [r["index"] for r in rows] == [0, 1, 2]
    assert [r["launches"] for r in rows] == [1, 2, 0]
    assert "boom" in rows[2]["error"]


@pytest.mark.gpu
def test_on_the_gpu_the_compile_pass_compiles_every_launch(tmp_path):
    rows = _precompile_rows(tmp_path, [GOOD, TWO_KERNELS])
    assert [(r["launches"], r["compiled"], r["error"]) for r in rows] == [(1, 1, ""), (2, 2, "")]


@pytest.mark.gpu
def test_on_the_gpu_the_screening_worker_compiles_nothing_the_compile_pass_did(tmp_path, monkeypatch):
    """The worker reads the pass's Triton cache: screening the variants after the pass
    adds no compiled kernel (.cubin) to it, and the statuses are those of a screen
    without the pass."""
    import tools.judge.precompile as pc
    import tools.judge.prescreen as ps
    cubins: list[set] = []

    def listed(env) -> set:
        cache = Path(env["TRITON_CACHE_DIR"])
        return {str(p.relative_to(cache)) for p in cache.rglob("*.cubin")}

    def pass_done(self):                         # the pass has ended; the worker has not begun its variants
        cubins.append(listed({"TRITON_CACHE_DIR": self.marker.parent / "triton-cache"}))
        real_done(self)
    real_done, real_worker = pc.CompilePass._done, ps._one_worker

    def worker(*args, **kwargs):
        real_worker(*args, **kwargs)
        cubins.append(listed(args[2]))
    monkeypatch.setattr(pc.CompilePass, "_done", pass_done)
    monkeypatch.setattr(ps, "_one_worker", worker)
    problem = tmp_path / "problem.py"
    problem.write_text(PROBLEM)
    sources = [GOOD, TWO_KERNELS, WRONG, GOOD.replace("BLOCK=256", "BLOCK=512").replace("n, 256", "n, 512")]
    with_pass = prescreen(problem, sources, device="cuda", settings=TrialSettings(), seed=3, gpu_index=0, jobs=2)
    after_pass, after_worker = cubins
    assert len(after_pass) >= 4 and after_worker == after_pass
    without = prescreen(problem, sources, device="cuda", settings=TrialSettings(), seed=3, gpu_index=0, jobs=1)
    assert [s.status for s in with_pass] == [s.status for s in without] == [CORRECT, INCORRECT, INCORRECT, CORRECT]


LINEAR = (Path(__file__).parent / "dialect" / "problems" / "linear_relu.py").read_text()


@pytest.mark.gpu
def test_on_the_gpu_a_variant_with_weights_sees_the_references_weights(tmp_path):
    """Reference and variants are constructed on the device from one seed: the same
    module is right, one with other weights (another seed's) is wrong."""
    problem = tmp_path / "problem.py"
    problem.write_text(LINEAR)
    same = LINEAR.replace("class Model(", "class ModelNew(")
    other = same.replace("self.linear = nn.Linear(", "torch.manual_seed(99)\n        self.linear = nn.Linear(")
    assert other != same
    screens = prescreen(problem, [same, other], device="cuda", settings=TrialSettings(), seed=5, gpu_index=0)
    assert [s.status for s in screens] == [CORRECT, INCORRECT]
