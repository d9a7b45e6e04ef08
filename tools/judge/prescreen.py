"""The pre-screen: many variants of a judged candidate checked and timed in one process.

A full judgement (tools/judge/pipeline.py) costs seconds of GPU wall on a KernelBench-size
problem (BENCHMARKS.md, "judge wall per candidate"): a fresh sandboxed worker, five trials
on secret inputs, the runtime guards, interleaved timing against eager and torch.compile.
The sweep's launch-constant and precision variants (agent/search/sweep.py) differ from a
candidate the judge already found correct only in constants, so most of that is spent
again on the same facts. The pre-screen asks two questions per variant, in one worker
process for all of them:

  1. right?  its output on ONE input (drawn from a seed the judge's trials never use) is
     compared with the reference's by the judge's rule ([eval] precision: tools/judge/accuracy.py);
     reference and variants are constructed on the device with one seed (the same weights;
     a KernelBench-size nn.Linear takes ~1 s to initialise on the CPU, per variant);
  2. fast?   a right one is timed: one forward captured in a CUDA graph, replayed
     (`reps` event-timed replays, the median); a forward that cannot be captured is
     timed by plain calls between events instead.

On cuda the variants' Triton kernels are compiled first, by several processes at once, into
a Triton cache of the pre-screen's own that the worker then reads (tools/judge/precompile.py):
compiling was most of a variant's cost, one after another in the worker.

It decides no verdict. The loop sends only the fastest right variants to the full judge
(agent/loop/prescreen.py); a variant wrong here never reaches it, and one right here but
wrong on the judge's own trials is judged incorrect there like any candidate. The worker
is a child process (`python -m tools.judge.prescreen SPEC`, CUDA_VISIBLE_DEVICES naming
the judge's GPU) that prints one JSON line per variant as it finishes: a variant that
kills it (an illegal address poisons the CUDA context) is reported failed and a new
worker goes on from the next one. The judge holds its GPU exclusively meanwhile
(tools/judge/session.py `Judge.prescreen`).
"""
from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORRECT, INCORRECT, FAILED = "correct", "incorrect", "failed"


@dataclass(frozen=True)
class Screen:
    """One variant's pre-screen: status, and for a correct one its median time."""
    index: int
    status: str                     # "correct" | "incorrect" | "failed"
    ms: float | None = None         # median forward time (cuda; None on cpu)
    how: str = ""                   # "cuda_graph" | "events" (how ms was measured)
    error: str = ""                 # why incorrect or failed, one line
    seconds: float = 0.0            # wall for this variant (import, compile, check, time)


def prescreen(problem_path: str | Path, sources: list[str], *, device: str, settings, seed: int,
              gpu_index: int | None = None, reps: int = 30, timeout_s: float = 120.0,
              jobs: int | None = None) -> list[Screen]:
    """A Screen for each of `sources` (candidate files' text), in order. `settings`: the
    judge's TrialSettings (tolerances, init_seed, module_mode); `seed`: the input's.
    On cuda the variants' kernels are first compiled by `jobs` processes at once
    (tools/judge/precompile.py; None: as many as the machine's cores allow, 1: none)
    into a Triton cache of this pre-screen's own, which the worker then reads."""
    results: dict[int, Screen] = {}
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH")))))
    if device == "cuda" and gpu_index is not None:
        env["CUDA_VISIBLE_DEVICES"] = _visible(gpu_index)
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    from tools.dialect.portable import portable     # each run in the form the judge judges it in
    from tools.judge.precompile import CompilePass, compile_jobs
    with tempfile.TemporaryDirectory(prefix="krefine-prescreen-") as tmp:
        files = []
        for i, src in enumerate(sources):
            f = Path(tmp) / f"variant_{i:03d}.py"
            f.write_text(portable(src), encoding="utf-8")
            files.append(str(f))
        compiling = None
        if device == "cuda":
            env["TRITON_CACHE_DIR"] = str(Path(tmp) / "triton-cache")
            width = compile_jobs(len(files)) if jobs is None else jobs
            if width > 1:
                compiling = CompilePass({"problem": str(problem_path), "init_seed": settings.init_seed,
                                         "module_mode": settings.module_mode}, files, env, width, timeout_s * 2)
        spec = {"problem": str(problem_path), "sources": files, "device": device, "seed": seed, "reps": reps,
                "tolerance": {"atol_fp32": settings.atol_fp32, "atol_half": settings.atol_half,
                              "rel_l2_fp32": settings.rel_l2_fp32, "rel_l2_half": settings.rel_l2_half,
                              "atol_fp64": settings.atol_fp64, "rel_l2_fp64": settings.rel_l2_fp64},
                "init_seed": settings.init_seed, "module_mode": settings.module_mode,
                "precision": settings.precision, "start": 0,
                "wait_for": str(compiling.marker) if compiling else None, "wait_s": timeout_s * 2}
        try:
            while len(results) < len(sources):
                spec["start"] = min(set(range(len(sources))) - set(results))
                spec_file = Path(tmp) / "spec.json"
                spec_file.write_text(json.dumps(spec), encoding="utf-8")
                _one_worker(spec_file, spec["start"], env, results, len(sources), timeout_s,
                            startup_s=timeout_s * (4 if compiling else 2))
        finally:
            if compiling:
                compiling.close()
    return [results[i] for i in range(len(sources))]


def _visible(gpu_index: int) -> str:
    listed = [x.strip() for x in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if x.strip()]
    return listed[gpu_index] if gpu_index < len(listed) else str(gpu_index)


def _one_worker(spec_file: Path, start: int, env: dict, results: dict[int, Screen], n: int, timeout_s: float,
                startup_s: float) -> None:
    """Run a worker from spec["start"] until it ends; the variant it was on when it died
    or stalled past `timeout_s` (`startup_s` for its first: imports, the reference and
    the compile pass) is recorded failed."""
    err = tempfile.TemporaryFile()
    proc = subprocess.Popen([sys.executable, "-m", "tools.judge.prescreen", str(spec_file)], cwd=ROOT, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err)
    current, buf, deadline = start, b"", time.monotonic() + startup_s
    try:
        while True:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([proc.stdout], [], [], max(0.0, left))
            if not ready:
                why = f"no result within {timeout_s:.0f} s"
                break
            chunk = os.read(proc.stdout.fileno(), 1 << 16)
            if not chunk:
                proc.wait()
                err.seek(0)
                tail = [ln for ln in err.read().decode("utf-8", "replace").splitlines() if ln.strip()]
                why = f"the worker exited ({proc.returncode}): {tail[-1][:300] if tail else 'no message'}"
                break
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                row = json.loads(line)
                if "setup_error" in row:        # the reference itself failed: every variant fails
                    for i in range(current, n):
                        results[i] = Screen(i, FAILED, error=row["setup_error"])
                    return
                results[row["index"]] = Screen(**row)
                current = row["index"] + 1
                deadline = time.monotonic() + timeout_s
            if current >= n:
                return
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        err.close()
    if current < n:
        results[current] = Screen(current, FAILED, error=why)


# ---------------------------------------------------------------- the worker

def _worker(spec: dict) -> None:
    import torch

    from tools.judge.numerics import tolerances
    from tools.judge.precompile import wait_for
    from tools.judge.reference import precise_outputs
    from tools.problem import build_model, load_problem, make_inputs, precision_flags
    from tools.settings import TrialSettings
    settings = TrialSettings(**spec["tolerance"], init_seed=spec["init_seed"], module_mode=spec["module_mode"],
                             precision=spec["precision"])
    dev = "cuda:0" if spec["device"] == "cuda" else "cpu"
    emit = _emitter()
    try:
        if dev == "cpu":
            from tools.dialect.runtime import install
            install("cpu")
        problem = load_problem(spec["problem"])
        inputs = make_inputs(problem.module, spec["seed"], dev)
        with torch.device(dev):                 # as every variant is built (_screen): the same weights
            model = build_model(problem.module.Model, problem.module, settings.init_seed, dev, settings.module_mode)
        with torch.no_grad(), precision_flags(settings.precision):   # the judge's reference's flags
            ref = model(*inputs)
        del model
        tol = tolerances(ref.dtype, settings)
        made: list = []   # the float64 outputs once made (None: they cannot be)

        def truths():   # the reference's float64 forward, made the first time a variant fails on the norm alone
            if not made:
                try:
                    with torch.device(dev):
                        twin = build_model(problem.module.Model, problem.module, settings.init_seed, dev,
                                           settings.module_mode)
                    got = precise_outputs(twin, inputs)
                except Exception:   # noqa: BLE001 - no truth: the float32 reference alone decides
                    got = None
                made.append(got)
            return made[0]
    except BaseException as e:                  # noqa: BLE001 - reported, never raised past the worker
        emit({"setup_error": f"the reference: {type(e).__name__}: {' '.join(str(e).split())[:300]}"})
        return
    wait_for(spec.get("wait_for"), spec.get("wait_s") or 0)   # the compile pass, started beside this worker
    for index in range(spec["start"], len(spec["sources"])):
        emit(asdict(_screen(index, spec["sources"][index], problem, inputs, ref, tol, settings, dev, spec["reps"],
                            truths)))


def _screen(index, path, problem, inputs, ref, tol, settings, dev, reps, truths=lambda: None) -> Screen:
    import torch

    from tools.judge.accuracy import decide
    from tools.judge.numerics import compare
    from tools.problem import build_model, exec_module
    t0 = time.monotonic()
    model = out = None
    try:
        mod = exec_module(Path(path), Path(path).read_text(encoding="utf-8"))
        with torch.device(dev):                 # weights drawn on the device: no seconds of CPU init per variant
            model = build_model(mod.ModelNew, problem.module, settings.init_seed, dev, settings.module_mode)
        with torch.no_grad():
            out = model(*inputs)
        if dev != "cpu":
            torch.cuda.synchronize()
        if not isinstance(out, torch.Tensor):
            return Screen(index, INCORRECT, error=f"forward returned {type(out).__name__}",
                          seconds=time.monotonic() - t0)
        c = decide(compare(out, ref, atol=tol[0], rtol=tol[1], rel_l2_limit=tol[2]), out, ref, truths, 0,
                   settings.precision, settings)
        if not c.ok:
            return Screen(index, INCORRECT, error=f"max abs error {c.max_abs_err:.3g}, rel l2 {c.rel_l2:.3g}",
                          seconds=time.monotonic() - t0)
        out = None
        ms, how = _time(model, inputs, reps) if dev != "cpu" else (None, "")
        return Screen(index, CORRECT, ms=ms, how=how, seconds=time.monotonic() - t0)
    except Exception as e:                      # noqa: BLE001 - the variant's fault, reported
        if dev != "cpu" and "CUDA" in str(e):
            raise                               # the context is gone: the parent starts a new worker
        return Screen(index, FAILED, error=f"{type(e).__name__}: {' '.join(str(e).split())[:300]}",
                      seconds=time.monotonic() - t0)
    finally:
        del model, out


def _time(model, inputs, reps: int) -> tuple[float, str]:
    """Median ms of one forward: replays of a CUDA graph of it, else plain calls."""
    import statistics

    import torch
    with torch.no_grad():
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                model(*inputs)
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        graph, how = torch.cuda.CUDAGraph(), "cuda_graph"
        try:
            with torch.cuda.graph(graph):
                model(*inputs)
            run = graph.replay
        except Exception:                       # noqa: BLE001 - host syncs, allocations: time plain calls
            torch.cuda.synchronize()
            graph, how = None, "events"

            def run():
                model(*inputs)
        times = []
        for _ in range(max(3, reps)):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            run()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        del graph
    return statistics.median(times), how


def _emitter():
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)                               # the candidates' prints go to stderr, not the protocol

    def emit(row: dict) -> None:
        out.write(json.dumps(row) + "\n")
        out.flush()
    return emit


if __name__ == "__main__":
    _worker(json.loads(Path(sys.argv[1]).read_text(encoding="utf-8")))
