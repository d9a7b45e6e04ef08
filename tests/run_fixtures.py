"""Test helpers for the loop (tests/test_graph.py, test_budgets.py, test_seed.py, test_resume_rundir.py, ...).

Two kinds of runs:
- `loop_run()`: the real graph, the real Run and the real prompts, with scripted stand-ins
  at the two boundaries only: the model (`ScriptedBackend`) and the judge pool
  (`ScriptedJudges`, JudgePool's interface), so budget and search tests take
  milliseconds. The stand-in judge reads a marker line in each candidate,
  `# judge: <status> [speedup]`; the profile policy is production's.
- `cli()`: the real `krefine` command in a subprocess (real evaluator, replay model).

Nothing here is product code: the stand-ins live only in tests.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import queue
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from agent.config import load_config
from agent.loop.graph import LoopContext, build_graph, run_graph
from agent.loop.progress import QuietProgress
from agent.loop.run import Run
from agent.loop.rundir import RunDir
from agent.models.llm import ReplayExhausted
from tools.judge.pipeline import Decided
from tools.verdict import Diagnostic, Status, Verdict

REPO = Path(__file__).resolve().parent.parent

TINY_PROBLEM = '''\
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(1000)]


def get_init_inputs():
    return []
'''


# a Triton kernel that runs but halves instead of clamping: judged "incorrect", so the
# loop keeps going; the comment ({i}) makes each candidate's source distinct
HALVING = '''```python
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):  # attempt {i}
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) * 0.5, mask=m)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        k[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
        return y
```'''


@dataclass
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    model: str = "scripted"
    finish_reason: str | None = "stop"


@dataclass
class ScriptedBackend:
    """Hands out `texts` in order, like replay:FILE; raises Exhausted when none are left."""
    texts: list[str]
    prompt_tokens: int = 100
    completion_tokens: int = 50
    name: str = "scripted"
    prompts: list[str] = field(default_factory=list)
    calls: list[int] = field(default_factory=list)

    def generate(self, prompt: str, n: int, sampling) -> list[Completion]:
        self.prompts.append(prompt)
        self.calls.append(n)
        if not self.texts:
            raise ReplayExhausted("no more completions")
        out, self.texts = self.texts[:n], self.texts[n:]
        return [Completion(t, self.prompt_tokens, self.completion_tokens) for t in out]

    def count_tokens(self, text: str) -> int:
        return len(text.split())


def judged(status: str, speedup: float | None = None, roofline: float | None = None,
           low: float | None = None) -> str:
    """A candidate the stand-in evaluator will judge `status` (at `speedup` vs eager, the
    low end of its interval `low`, by default the speedup itself)."""
    tail = f" {speedup}" if speedup is not None else ""
    tail += f" roofline={roofline}" if roofline is not None else ""
    tail += f" low={low}" if low is not None else ""
    return f"```python\n# judge: {status}{tail}\nclass ModelNew: pass\n```"


@dataclass
class ScriptedEvaluator:
    """Judges by the `# judge:` marker; counts calls per candidate name."""
    calls: list[str] = field(default_factory=list)

    def __call__(self, problem, src: str, *, device, settings, candidate_name, profile, gpu_index) -> Verdict:
        candidate_name = candidate_name.removesuffix(".py")
        self.calls.append(candidate_name)
        m = re.search(r"# judge: (\w+)(?: ([\d.]+))?(?: roofline=([\d.]+))?(?: low=([\d.]+))?", src)
        status = Status(m.group(1))
        speedup = float(m.group(2)) if m.group(2) else None
        roofline = {"class": "memory-bound", "roofline_fraction": float(m.group(3))} if m.group(3) else None
        low = float(m.group(4)) if m.group(4) else speedup
        interval = {b: {"ratio": speedup, "low": low, "high": speedup + (speedup - low), "rounds": 5,
                        "method": "rounds_log_t"} for b in ("eager", "compile")} if speedup else {}
        diags = () if status is Status.CORRECT else (Diagnostic(kind="scripted", message=f"scripted {status.value}"),)
        # the judge's phases up to where this status is reached (compile errors and static rejects end at compile)
        phases = {"compile": 0.01} if status in (Status.COMPILE_ERROR, Status.REJECTED) else \
            {"compile": 0.01, "test": 0.02, **({"time": 0.03, "profile": 0.04} if speedup else {})}
        return Verdict(status=status, diagnostics=diags, speedup_eager=speedup, speedup_compile=speedup,
                       speedup_interval=interval, checks={"phase_s": phases}, bottleneck=roofline,
                       feedback=f"feedback of {candidate_name}: {status.value}")


def extract(text: str) -> str | None:
    m = re.search(r"```python\n(.*?)```", text, re.S)
    return m.group(1) if m else None


class ScriptedJudges:
    """The judge pool's interface (tools.judge.JudgePool: begin, add_bottleneck,
    concurrency, close) over a scripted evaluator: each judgement is whole at once
    (tools.judge.pipeline.Decided, as a Ray judge actor's is), one per GPU at a time."""

    def __init__(self, problem, device: str, settings, evaluate, gpus: int = 1):
        self.problem, self.device, self.settings, self.evaluate = problem, device, settings, evaluate
        self.concurrency = max(1, gpus)
        self.profiled: list[str] = []
        self._free: queue.Queue[int] = queue.Queue()
        for i in range(self.concurrency):
            self._free.put(i)

    @contextlib.contextmanager
    def _gpu(self):
        gpu = self._free.get()
        try:
            yield gpu
        finally:
            self._free.put(gpu)

    def begin(self, src: str, *, candidate_name: str, profile: bool) -> Decided:
        def whole() -> Verdict:
            with self._gpu() as gpu:
                return self.evaluate(self.problem, src, device=self.device, settings=self.settings,
                                     candidate_name=candidate_name, profile=profile, gpu_index=gpu)
        return Decided(whole)

    def add_bottleneck(self, src: str, verdict: Verdict, *, candidate_name: str) -> Verdict:
        """[eval] profile = "refined": what the real profile step adds, scripted."""
        self.profiled.append(candidate_name.removesuffix(".py"))
        phase_s = {**verdict.checks.get("phase_s", {}), "profile_refined": 0.0}
        return dataclasses.replace(verdict, checks={**verdict.checks, "phase_s": phase_s},
                                   bottleneck=verdict.bottleneck or {"class": "memory-bound", "roofline_fraction": 0.1})

    def close(self) -> None:
        pass


@dataclass
class Problem:
    path: Path
    name: str
    source: str


def loop_run(tmp_path: Path, texts: list[str], *, device: str = "cuda", gpus: int = 1,
             wall_offset_s: float = 0.0, evaluator=None, prepare=None, make_seed=None,
             progress=None, resume: bool = False,
             **overrides) -> tuple[dict, RunDir, ScriptedBackend, ScriptedEvaluator]:
    """Run the real graph to its end with a scripted model and judge; returns the final
    state with the run's candidates beside it (Run.view). `prepare(run)`: leave what a
    killed session left first. `resume`: go on with the run already in tmp_path/run, from
    its files (`texts` are then the completions left to hand out)."""
    rd = RunDir(tmp_path / "run")
    run = Run(rd) if resume else Run.create(rd, {"problem": {}, "config": {}, "model": "scripted"})
    if prepare is not None:
        prepare(run)
        run = Run(rd)   # read back, as a resumed session would
    problem_path = tmp_path / "tiny.py"
    problem_path.write_text(TINY_PROBLEM)
    config = load_config(None, {"budget.target_speedup": 1.5, **overrides})
    backend, evaluator = ScriptedBackend(list(texts)), evaluator or ScriptedEvaluator()
    problem = Problem(problem_path, "tiny", TINY_PROBLEM)
    ctx = LoopContext(run=run, problem=problem, config=config, backend=backend, device=device,
                      progress=progress or QuietProgress(), wall_offset_s=wall_offset_s, make_seed=make_seed,
                      judges=ScriptedJudges(problem, device, config.eval, evaluator, gpus))
    state = run_graph(build_graph(), ctx, run.state(str(problem_path)))
    return run.view(state), rd, backend, evaluator


# ---------------------------------------------------------------- the real CLI

def cli(*args: str, cwd: Path | None = None, timeout: float = 300, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "agent.cli", *args], cwd=cwd or REPO, env={**cli_env(), **(env or {})},
                          capture_output=True, text=True, timeout=timeout)


def cli_here(*args: str, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    """What `cli()` gives, from the real CLI's `main()` in this process: no new Python,
    whose imports are most of an exit-status test's time. For what the command says and
    returns; `cli()` stays for what needs a process of its own (signals, a terminal, what is
    left running, a whole run judged)."""
    import contextlib
    import io
    from agent.cli import main
    out, err = io.StringIO(), io.StringIO()
    saved_env, saved_cwd, saved_argv = dict(os.environ), os.getcwd(), sys.argv
    os.environ.update({**cli_env(), **(env or {})})   # the environment cli() gives its process
    sys.argv = ["krefine", *args]   # the CLI names a flag as the user spelled it, from argv
    try:
        os.chdir(cwd or REPO)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main(list(args))
            except SystemExit as e:   # argparse's usage errors
                rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        sys.argv = saved_argv
    return subprocess.CompletedProcess(["krefine", *args], rc, out.getvalue(), err.getvalue())


def cli_env() -> dict:
    # tests never reach the network: a model id that is not cached fails at once
    # this checkout first; the rest of PYTHONPATH stays (the GPU machine's carried wheels live there)
    path = os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH"))))
    # krefine eval judges in its own process unless a test asks for the judge service
    # (tests/test_judge_service.py): no service outlives a test
    return {**os.environ, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1",
            "KREFINE_KEEP_JUDGE_S": "0"}


def processes_under(root: Path, module: str) -> set[int]:
    """Pids of processes running `module` (e.g. tools.sandbox.forkserver) whose environment
    names `root` (a TMPDIR a test started them with, or a dir below it): the test's own,
    not those of anything else running on the machine."""
    out = subprocess.run(["pgrep", "-f", module], capture_output=True, text=True).stdout
    found = set()
    for pid in out.split():
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if str(root).encode() in environ:
            found.add(int(pid))
    return found


def fast_config(tmp_path: Path, **tables) -> Path:
    """An agent.toml for tests: two correctness trials instead of five."""
    doc = {"eval": {"trials": 2}, **tables}
    lines = []
    for table, values in doc.items():
        lines.append(f"[{table}]")
        lines += [f"{k} = {json.dumps(v)}" for k, v in values.items()]
    path = tmp_path / "fast.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def write_replay(path: Path, completions: list[str]) -> Path:
    path.write_text("".join(json.dumps({"completion": c}) + "\n" for c in completions))
    return path


def send_json(handler, doc, status: int = 200) -> None:
    """A stand-in server's JSON answer (an http.server request handler's reply)."""
    data = json.dumps(doc).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)
