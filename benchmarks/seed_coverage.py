"""Seed coverage: which problems of a directory get a pure-Triton Inductor seed, and how long each took.

Runs `python -m tools.dialect seed PROBLEM --device D` (torch.compile, conversion, the static
guards; nothing judged) for every problem file in DIR, JOBS at a time, each in its own process
with a time limit, and prints one line per problem as it ends, then the count of seeds and the
reasons for the rest. Nothing is cached: every seed is compiled now.

    python benchmarks/seed_coverage.py KernelBench/level3 --device cpu --jobs 2 --timeout 600 \\
        --out seed_coverage.json

On a CPU the seeds are converted, not run (Triton's interpreter is too slow for level-3
inputs); `krefine bench` judges them. `--block-ops N` sets the capture's block_ops (0: every
graph whole; tools/dialect/blocks.py). `--run` (cuda) also runs each seed beside its Model,
exact fp32 on both sides: the largest difference on one call, and for each its median forward
over 20 calls (CUDA events; a rough figure: the judge's clock is `krefine bench`'s), the host
time of the call itself, the GPU's alone (the forward replayed as a CUDA graph) and the seed's
Triton launches a forward: where wall and host agree and the GPU's time is well below, the
forward waits on Python. `--launch-cost` (cuda) first prints the host microseconds of one
launch: Triton kernels of 5 and of 24 arguments through `kernel[grid](...)`, krefine's gemm
launcher, torch.mm and torch.mul on the same small tensors, and the two kernels' compiled launcher called
directly (what a launch costs without `JITFunction.run`'s Python). `--phases` makes each seed in a child
that times where its seconds go: until Inductor's output module is written (building the model,
Dynamo's trace, AOT autograd, lowering, codegen), loading it (the Triton compiles), its first run
(on cuda, the autotuner's benchmarks), the rest of the capture, and the conversion; with `--run`
it also converts the same capture without the autotuner's choices (each kernel's config from
Inductor's heuristics, as a capture that compiled nothing would give) and runs that seed too.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def natural(path: Path) -> list:
    return [int(t) if t.isdigit() else t.lower() for t in re.split(r"(\d+)", path.name)]


RUN = """
import json, statistics, sys, time, importlib.util
import torch
def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module); return module
seed, problem = load("seed", sys.argv[1]), load("problem", sys.argv[2])
torch.backends.cudnn.allow_tf32 = False; torch.backends.cuda.matmul.allow_tf32 = False
torch.manual_seed(0); model = problem.Model(*problem.get_init_inputs()).cuda()
torch.manual_seed(0); new = seed.ModelNew(*problem.get_init_inputs()).cuda()
torch.manual_seed(1); inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in problem.get_inputs()]
def flat(o):
    return list(o) if isinstance(o, (tuple, list)) else [o]
def ms(f):
    for _ in range(3): f(*inputs)
    times, host = [], []
    for _ in range(20):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(); a.record(); t0 = time.perf_counter(); f(*inputs); host.append(time.perf_counter() - t0)
        b.record(); torch.cuda.synchronize(); times.append(a.elapsed_time(b))
    return statistics.median(times), statistics.median(host) * 1e3, graph_ms(f)
def graph_ms(f):   # the GPU's time alone: the forward captured once and replayed
    try:
        g, side = torch.cuda.CUDAGraph(), torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            f(*inputs)
        torch.cuda.current_stream().wait_stream(side)
        with torch.cuda.graph(g):
            f(*inputs)
        times = []
        for _ in range(20):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record(); g.replay(); b.record(); torch.cuda.synchronize(); times.append(a.elapsed_time(b))
        return statistics.median(times)
    except Exception:   # a forward no graph can hold (a host copy in it)
        return None
from triton.runtime.jit import JITFunction
launches, run = [0], JITFunction.run
def counted(self, *args, **kwargs):
    launches[0] += not kwargs.get("warmup")
    return run(self, *args, **kwargs)
JITFunction.run = counted
with torch.no_grad():
    error = max((g - w).abs().max().item() for w, g in zip(flat(model(*inputs)), flat(new(*inputs))))
    launches[0] = 0; new(*inputs); per_forward = launches[0]
    (seed_ms, seed_host, seed_gpu), (eager_ms, eager_host, eager_gpu) = ms(new), ms(model)
    print(json.dumps({"error": error, "seed_ms": seed_ms, "eager_ms": eager_ms, "seed_host_ms": seed_host,
                      "eager_host_ms": eager_host, "seed_gpu_ms": seed_gpu, "eager_gpu_ms": eager_gpu,
                      "launches": per_forward}))
"""

PHASES = """
import dataclasses, json, sys, time
import torch
import torch._inductor.compile_fx as cfx
from torch._inductor.codecache import PyCodeCache
from tools.problem import load_problem
from tools.dialect.inductor_capture import capture
from tools.dialect.kernelbook import accepted_seed
path, device, out, untuned = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:] == ["untuned"]
marks, t0 = {}, time.monotonic()
compile_fx, loader = cfx.compile_fx, PyCodeCache.__dict__["load_by_key_path"]
def load(cls, *args, **kwargs):   # the output module written: trace, lowering and codegen done
    marks.setdefault("codegen", time.monotonic())
    return loader.__get__(None, cls)(*args, **kwargs)
def compiled(*args, **kwargs):
    run = compile_fx(*args, **kwargs)
    marks.setdefault("loaded", time.monotonic())
    def first(*inputs):
        result = run(*inputs)
        if device == "cuda":
            torch.cuda.synchronize()
        marks.setdefault("ran", time.monotonic())
        return result
    return first
cfx.compile_fx, PyCodeCache.load_by_key_path = compiled, classmethod(load)
phases, reason = {}, ""
try:
    problem = load_problem(path)
    cap = capture(problem, device)
    t1 = time.monotonic()
    coded, loaded, ran = marks.get("codegen"), marks.get("loaded"), marks.get("ran")   # ran: cuda only
    phases = {"trace_to_codegen_s": coded - t0, "load_s": loaded - coded} if coded and loaded else {}
    phases.update({"first_run_s": ran - loaded} if ran and loaded else {})
    phases = {k: round(v, 1) for k, v in {**phases, "capture_rest_s": t1 - (ran or loaded or t0)}.items()}
    open(out, "w").write(accepted_seed(problem, cap))
    phases["convert_s"] = round(time.monotonic() - t1, 1)
    if untuned:
        code = accepted_seed(problem, dataclasses.replace(cap, launch_configs={}))
        open(out[:-3] + ".untuned.py", "w").write(code)
except ValueError as e:
    reason = str(e)
print(json.dumps({"phases": phases, "reason": reason}))
"""

LAUNCH_COST = """
import json, time, torch, triton, triton.language as tl
from tools.kernels.gemm import gemm
@triton.jit
def five(x_ptr, y_ptr, n, a, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + i, tl.load(x_ptr + i, mask=i < n) * a, mask=i < n)
@triton.jit
def wide(a_ptr, b_ptr, c_ptr, d_ptr, M, N, K, s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11, s12, s13, s14,
         alpha, beta, HAS: tl.constexpr, P: tl.constexpr, BM: tl.constexpr):   # gemm_kernel's 24 arguments
    i = tl.program_id(0) * BM + tl.arange(0, BM)
    tl.store(d_ptr + i, tl.load(a_ptr + i, mask=i < M) * alpha, mask=i < M)
x, y = torch.randn(1024, device="cuda"), torch.empty(1024, device="cuda")
a, b, c = torch.randn(8, 64, device="cuda"), torch.randn(64, 64, device="cuda"), torch.empty(8, 64, device="cuda")
def us(f, n=20000):
    for _ in range(200): f()
    torch.cuda.synchronize(); t0 = time.perf_counter()
    for _ in range(n): f()
    t1 = time.perf_counter(); torch.cuda.synchronize()
    return round((t1 - t0) / n * 1e6, 1)
w_args = (x, x, x, y, 1024, 64, 64, *range(15), 1.0, 1.0)
w_meta = dict(HAS=True, P="ieee", BM=256)
got = {"triton_5_args_us": us(lambda: five[(4,)](x, y, 1024, 2.0, BLOCK=256)),
       "triton_24_args_us": us(lambda: wide[(4, 1)](*w_args, **w_meta, num_warps=4, num_stages=3)),
       "krefine_gemm_us": us(lambda: gemm(a, b, out=c)), "torch_mm_us": us(lambda: torch.mm(a, b, out=c)),
       "torch_mul_us": us(lambda: torch.mul(x, 2.0, out=y))}
try:   # the same kernels' compiled launcher called directly: what a launch costs without JITFunction.run's Python
    from triton.runtime import driver
    stream = driver.active.get_current_stream(driver.active.get_current_device())
    for name, fn, args, grid, bound in (("5", five, (x, y, 1024, 2.0), (4,), (x, y, 1024, 2.0, 256)),
                                        ("24", wide, w_args, (4, 1), (*w_args, True, "ieee", 256))):
        k = fn.warmup(*args, grid=grid, **({"BLOCK": 256} if name == "5" else dict(w_meta, num_warps=4, num_stages=3)))
        k._init_handles()
        got[f"launcher_{name}_args_us"] = us(lambda: k.run(4, 1, 1, stream, k.function, k.packed_metadata, None, None,
                                                           None, *bound))
except Exception as e:   # another Triton's launcher signature
    got["launcher_error"] = f"{type(e).__name__}: {e}"[:120]
print(json.dumps(got))
"""


def seed_one(problem: Path, device: str, timeout_s: float, block_ops: int | None = None, run: bool = False,
             phases: bool = False) -> dict:
    """One problem's seed in a fresh process: {"problem", "seed": bool, "seconds", "reason"}
    (and, `run`, "error", "seed_ms", "eager_ms"; `phases`, "phases" and with `run` "untuned")."""
    import tempfile
    with tempfile.TemporaryDirectory(prefix="seed-coverage-") as tmp:
        return _seed_in(problem, device, timeout_s, block_ops, run, Path(tmp) / f"{problem.stem}.py", phases)


def _seed_in(problem: Path, device: str, timeout_s: float, block_ops: int | None, run: bool, out: Path,
             phases: bool = False) -> dict:
    t0 = time.monotonic()
    cmd = [sys.executable, "-m", "tools.dialect", "seed", str(problem), "--device", device, "--out", str(out)]
    if phases:
        cmd = [sys.executable, "-c", PHASES, str(problem), device, str(out)] + (["untuned"] if run else [])
    try:
        done = subprocess.run(cmd + (["--block-ops", str(block_ops)] if block_ops is not None else []),
                              cwd=ROOT, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return {"problem": problem.stem, "seed": False, "seconds": round(time.monotonic() - t0, 1),
                "reason": f"no seed within {timeout_s:g} s"}
    lines = [ln for ln in done.stderr.splitlines() if ln.startswith("kernelbook: ")] or \
        [ln for ln in done.stderr.splitlines() if ln.strip()][-1:] or [f"exit status {done.returncode}"]
    said = json.loads(done.stdout.strip().splitlines()[-1]) if phases and done.returncode == 0 else {}
    lines = [f"kernelbook: {said['reason']}"] if said.get("reason") else lines
    ok = done.returncode == 0 and out.exists() and "class ModelNew" in out.read_text(encoding="utf-8")
    result = {"problem": problem.stem, "seed": ok, "seconds": round(time.monotonic() - t0, 1),
              "reason": "" if ok else lines[-1].removeprefix("kernelbook: ")[:300]}
    if phases:
        result["phases"] = said.get("phases", {})
    if ok and run:
        result.update(_run(out, problem, timeout_s))
        untuned = out.with_suffix(".untuned.py")
        if untuned.exists():
            result["untuned"] = _run(untuned, problem, timeout_s)
    return result


def _run(seed: Path, problem: Path, timeout_s: float) -> dict:
    ran = subprocess.run([sys.executable, "-c", RUN, str(seed), str(problem)], cwd=ROOT, capture_output=True,
                         text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
    said = ran.stdout.strip().splitlines()[-1:] if ran.returncode == 0 else []
    return json.loads(said[0]) if said else {"error": None, "run_failed": ran.stderr.strip()[-300:]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("directory", type=Path, help="a directory of KernelBench-format problem files")
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--jobs", type=int, default=2, help="seeds compiled at once")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per problem")
    ap.add_argument("--out", type=Path, help="write every problem's result here as JSON")
    ap.add_argument("--block-ops", type=int, help="the capture's block_ops (0: every graph whole)")
    ap.add_argument("--run", action="store_true", help="cuda: run each seed beside its Model (error, ms)")
    ap.add_argument("--launch-cost", action="store_true", help="cuda: first, the host time of one launch")
    ap.add_argument("--phases", action="store_true", help="time each seed's phases (with --run: untuned too)")
    args = ap.parse_args(argv)
    if args.phases and args.block_ops is not None:
        ap.error("--phases times a whole-graph capture: leave out --block-ops")
    if (args.run or args.launch_cost) and args.device != "cuda":
        ap.error("--run and --launch-cost need --device cuda")
    if args.launch_cost:   # from a file: @triton.jit reads its kernels' source
        import tempfile
        with tempfile.NamedTemporaryFile("w", suffix=".py") as script:
            script.write(LAUNCH_COST)
            script.flush()
            done = subprocess.run([sys.executable, script.name], cwd=ROOT, capture_output=True, text=True,
                                  env={**os.environ, "PYTHONPATH": str(ROOT)})
        print(f"host time of one launch: {(done.stdout.strip().splitlines() or [done.stderr[-300:]])[-1]}", flush=True)
    problems = sorted(args.directory.glob("*.py"), key=natural)
    if not problems:
        print(f"seed_coverage: {args.directory}: no problem files", file=sys.stderr)
        return 2
    print(f"seed coverage: {len(problems)} problems in {args.directory}, device {args.device}, "
          f"{args.jobs} at a time, {args.timeout:g} s each", flush=True)
    results: list[dict] = []
    with ThreadPoolExecutor(args.jobs) as pool:
        for r in pool.map(lambda p: seed_one(p, args.device, args.timeout, args.block_ops, args.run, args.phases),
                          problems):
            results.append(r)
            gpu = [f"{r[k]:.2f}" if r.get(k) is not None else "-" for k in ("seed_gpu_ms", "eager_gpu_ms")]
            ran = f", error {r['error']:.2e}, seed {r['seed_ms']:.2f} ms (host {r['seed_host_ms']:.2f}, GPU {gpu[0]}, " \
                f"{r['launches']} launches), eager {r['eager_ms']:.2f} ms (host {r['eager_host_ms']:.2f}, GPU {gpu[1]})" \
                if r.get("error") is not None else (f", run failed: {r['run_failed']}" if "run_failed" in r else "")
            ran += "".join(f", {k.removesuffix('_s')} {v:g} s" for k, v in r.get("phases", {}).items())
            u = r.get("untuned", {})
            ran += f"; heuristic configs: seed {u['seed_ms']:.2f} ms, error {u['error']:.2e}" \
                if u.get("error") is not None else (f"; heuristic configs: {u['run_failed']}" if u else "")
            print(f"[{len(results)}/{len(problems)}] {r['problem']}: {'seed' if r['seed'] else 'no seed: ' + r['reason']}"
                  f" ({r['seconds']:.0f} s{ran})", flush=True)
    seeded = [r for r in results if r["seed"]]
    total = sum(r["seconds"] for r in results)
    print(f"seeds: {len(seeded)}/{len(results)}; {total / 60:.1f} min in all, median "
          f"{sorted(r['seconds'] for r in results)[len(results) // 2]:.0f} s a problem")
    for r in results:
        if not r["seed"]:
            print(f"  no seed: {r['problem']}: {r['reason']}")
    if args.out:
        args.out.write_text(json.dumps({"directory": str(args.directory), "device": args.device,
                                        "timeout_s": args.timeout, "block_ops": args.block_ops,
                                        "results": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
