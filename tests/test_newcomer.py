"""What a newcomer meets first (issue 48): `krefine` alone, a problem file that is not Python
or whose reference forward raises, a reason too long for one line, the device named first,
a verdict worded one way, progress through long silences, best.py outside krefine."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from agent.cli import main
from tests.run_fixtures import REPO

BROKEN_FORWARD = textwrap.dedent("""\
    import torch
    from torch import nn
    class Model(nn.Module):
        def forward(self, x):
            return x @ x
    def get_inputs():
        return [torch.randn(3, 4)]
    def get_init_inputs():
        return []
    """)


def test_krefine_alone_prints_its_usage_to_stderr_and_exits_2(capsys):
    assert main([]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: krefine") and "run" in err and "eval" in err


def test_a_problem_with_a_syntax_error_is_reported_by_run_without_importing_torch(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\nclass Model(torch.nn.Module)\n    pass\n")
    code = ("import sys; from agent.cli import main; rc = main(['run', sys.argv[1], '--out', sys.argv[2]]); "
            "assert 'torch' not in sys.modules, 'torch imported'; sys.exit(rc)")
    r = subprocess.run([sys.executable, "-c", code, str(bad), str(tmp_path / "run")], cwd=REPO,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    assert "not valid Python" in r.stderr and "line 2" in r.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("model", [["--model", "none", "--seed-kernel", "inductor"], []])
def test_a_reference_forward_that_raises_is_exit_2_before_a_run_directory(tmp_path, capsys, model):
    problem = tmp_path / "matmul.py"
    problem.write_text(BROKEN_FORWARD)
    out = tmp_path / "run"
    assert main(["run", str(problem), "--device", "cpu", "--out", str(out), *model]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(problem) in err
    assert "Model.forward" in err and "shapes cannot be multiplied" in err
    assert not out.exists()


def test_a_forward_the_meta_device_cannot_follow_still_loads(tmp_path):
    from tools.problem import load_problem
    problem = tmp_path / "dd.py"
    problem.write_text(BROKEN_FORWARD.replace("return x @ x", "return x[x > 0] * x.sum().item()"))
    assert load_problem(problem).name == "dd"


def test_the_first_line_of_a_cpu_run_says_it_runs_in_the_interpreter_untimed():
    import io
    from agent.loop.progress import PlainProgress
    out = io.StringIO()
    PlainProgress(out).started("relu", "cpu", "runs/x")
    first = out.getvalue().splitlines()[0]
    assert first.startswith("krefine: relu on cpu (Triton's interpreter)") and "nothing timed" in first


def test_a_judgement_silent_for_10_seconds_gets_a_heartbeat_naming_the_candidate_and_step(monkeypatch):
    import io
    from agent.loop.progress import PlainProgress
    clock = [100.0]
    monkeypatch.setattr("agent.loop.progress.time.monotonic", lambda: clock[0])
    out = io.StringIO()
    p = PlainProgress(out)
    p.beats = False                       # the test beats, not a thread
    p.judging({"id": "r00-c00", "round": 0, "parent": None})
    p.stepping("r00-c00", "test")
    clock[0] += 9
    p.beat()
    assert len(out.getvalue().splitlines()) == 1          # the judging line only
    clock[0] += 2
    p.beat()
    assert out.getvalue().splitlines()[-1] == "  … r00-c00 judging: test (the trials), 11 s"
    p.beat()                                              # just said: quiet for another 10 s
    assert len(out.getvalue().splitlines()) == 2


def test_the_run_and_inspect_word_each_verdict_the_same(tmp_path, capsys):
    import io
    from agent.loop.progress import PlainProgress
    from agent.loop.runstats import load_run
    from tests.run_fixtures import judged, loop_run
    out = io.StringIO()
    _, rd, _, _ = loop_run(tmp_path, [judged("incorrect"), judged("correct", 1.2)], progress=PlainProgress(out),
                           **{"budget.max_rounds": 2, "budget.candidates_per_round": 1})
    said = " ".join(out.getvalue().split())          # a long line is wrapped
    run = load_run(rd.root)
    assert len(run.candidates) == 2
    assert main(["inspect", str(rd.root)]) == 0
    shown = " ".join(capsys.readouterr().out.replace("│", " ").split())
    for c in run.candidates.values():
        words = " ".join(f"{c.id} {c.words}".split())
        assert words in said and words in shown, (words, said, shown)


def test_a_long_reason_is_wrapped_between_words_never_cut():
    import io
    from agent.loop.progress import PlainProgress
    reason = "not Triton; write the matmul as a tl.dot loop " * 6 + "dilation=(1, 1)"
    out = io.StringIO()
    PlainProgress(out)._line(f"best: none ({reason})")
    text = out.getvalue()
    assert " ".join(text.split()) == f"best: none ({reason})"
    assert all(len(line) <= 100 for line in text.splitlines())


def test_a_one_line_fault_is_cut_only_between_words():
    from tools.errors import describe_fault
    words = " ".join(f"word{i}" for i in range(400))
    line = describe_fault(RuntimeError(words))
    assert line.endswith(" …") and len(line) < 700
    assert line.removesuffix(" …").split()[-1] in words.split()


BARE_CHECK = textwrap.dedent("""
    import sys, torch
    sys.path.insert(0, sys.argv[1])
    import problem, kernel
    assert not any(m.split(".")[0] in ("tools", "agent") for m in sys.modules), "krefine was imported"
    init = problem.get_init_inputs()
    torch.manual_seed(1); ref = problem.Model(*init)
    torch.manual_seed(1); new = kernel.ModelNew(*init)
    torch.manual_seed(2); x = problem.get_inputs()
    with torch.no_grad():
        want, got = ref(*x), new(*x)
    print(torch.allclose(want, got, atol=1e-4, rtol=1e-4))
    """)


@pytest.mark.parametrize("kernel, problem", [("ok_gelu_grid", "gelu"), ("ok_layernorm_persistent", "layernorm_relu")])
def test_a_delivered_kernel_calling_erf_or_rsqrt_runs_in_a_bare_triton_interpreter(tmp_path, kernel, problem):
    """The portable form (what is judged and delivered), in `python -I` with TRITON_INTERPRET=1
    and no krefine: libdevice's erf and rsqrt were written with tl."""
    import os
    from tools.dialect.portable import portable
    dialect = REPO / "tests" / "dialect"
    src = (dialect / "candidates" / f"{kernel}.py").read_text(encoding="utf-8")
    assert "libdevice." in src
    (tmp_path / "kernel.py").write_text(portable(src), encoding="utf-8")
    (tmp_path / "problem.py").write_bytes((dialect / "problems_small" / f"{problem}.py").read_bytes())
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-I", "-c", BARE_CHECK, str(tmp_path)], capture_output=True, text=True,
                          cwd=tmp_path, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-1] == "True"


TANH_KERNEL = textwrap.dedent("""\
    import torch
    import triton
    import triton.language as tl
    from triton.language.extra import libdevice

    @triton.jit
    def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n)
        tl.store(y_ptr + offs, libdevice.tanh(x) * libdevice.rsqrt(x * x + 1.0), mask=offs < n)
    """)


def test_a_libdevice_call_the_interpreter_lacks_is_named_on_the_import_line_as_needing_a_gpu():
    from tools.dialect.portable import portable
    out = portable(TANH_KERNEL)
    import_line = next(line for line in out.splitlines() if "import libdevice" in line)
    assert "needs a GPU: libdevice.tanh is not in Triton's interpreter" in import_line
    assert "tl.rsqrt(" in out and "libdevice.tanh(" in out
    assert portable(out) == out and len(out.splitlines()) == len(TANH_KERNEL.splitlines())


def test_libdevice_sqrt_stays_libdevices_since_it_may_be_fp64_which_tl_sqrt_rn_refuses():
    from tools.dialect.portable import portable
    out = portable(TANH_KERNEL.replace("libdevice.tanh(x)", "libdevice.sqrt(x.to(tl.float64)).to(tl.float32)"))
    assert "libdevice.sqrt(x.to(tl.float64))" in out and "sqrt_rn" not in out


def test_export_says_a_kernel_that_needs_a_gpu_does(tmp_path, capsys):
    from tools.dialect.interp_math import in_the_interpreter
    from tests.run_fixtures import judged, loop_run
    _, rd, _, _ = loop_run(tmp_path, [judged("correct", 1.2)], **{"budget.max_rounds": 1, "budget.candidates_per_round": 1})
    best = next(c for c in rd.written())
    rd.candidate_src(best).write_text(in_the_interpreter(TANH_KERNEL), encoding="utf-8")
    assert main(["export", str(rd.root), "--kernel", best, "-o", str(tmp_path / "k.py")]) == 0
    said = capsys.readouterr()
    assert "needs a GPU" in said.err and "libdevice.tanh" in said.err
    assert "runs wherever Triton does" not in said.out


def test_a_seeds_guard_reason_is_kept_whole_with_its_advice():
    from tools.dialect.kernelbook import guard_rejection
    src = textwrap.dedent("""\
        import torch
        from torch import nn
        from torch._inductor.select_algorithm import extern_kernels
        class ModelNew(nn.Module):
            def forward(self, x, w):
                buf = torch.empty((4, 4), device=x.device)
                extern_kernels.mm(x, w, out=buf)
                return buf
        """)
    reason = guard_rejection(src)
    assert "not Triton; write the matmul as a @triton.jit kernel" in reason and reason.endswith("(line 7)")
