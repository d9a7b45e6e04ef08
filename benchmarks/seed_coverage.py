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
exact fp32 on both sides: the largest difference on one call, and each one's median forward
time over 20 calls (CUDA events; a rough figure: the judge's clock is `krefine bench`'s).
"""
from __future__ import annotations

import argparse
import json
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
import json, statistics, sys, importlib.util
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
    times = []
    for _ in range(20):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); f(*inputs); b.record(); torch.cuda.synchronize(); times.append(a.elapsed_time(b))
    return statistics.median(times)
with torch.no_grad():
    error = max((g - w).abs().max().item() for w, g in zip(flat(model(*inputs)), flat(new(*inputs))))
    print(json.dumps({"error": error, "seed_ms": ms(new), "eager_ms": ms(model)}))
"""


def seed_one(problem: Path, device: str, timeout_s: float, block_ops: int | None = None, run: bool = False) -> dict:
    """One problem's seed in a fresh process: {"problem", "seed": bool, "seconds", "reason"}
    (and, `run`, "error", "seed_ms", "eager_ms")."""
    import tempfile
    with tempfile.TemporaryDirectory(prefix="seed-coverage-") as tmp:
        return _seed_in(problem, device, timeout_s, block_ops, run, Path(tmp) / f"{problem.stem}.py")


def _seed_in(problem: Path, device: str, timeout_s: float, block_ops: int | None, run: bool, out: Path) -> dict:
    t0 = time.monotonic()
    cmd = [sys.executable, "-m", "tools.dialect", "seed", str(problem), "--device", device, "--out", str(out)]
    try:
        done = subprocess.run(cmd + (["--block-ops", str(block_ops)] if block_ops is not None else []),
                              cwd=ROOT, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return {"problem": problem.stem, "seed": False, "seconds": round(time.monotonic() - t0, 1),
                "reason": f"no seed within {timeout_s:g} s"}
    lines = [ln for ln in done.stderr.splitlines() if ln.startswith("kernelbook: ")] or \
        [ln for ln in done.stderr.splitlines() if ln.strip()][-1:] or [f"exit status {done.returncode}"]
    ok = done.returncode == 0 and out.exists() and "class ModelNew" in out.read_text(encoding="utf-8")
    result = {"problem": problem.stem, "seed": ok, "seconds": round(time.monotonic() - t0, 1),
              "reason": "" if ok else lines[-1].removeprefix("kernelbook: ")[:300]}
    if ok and run:
        ran = subprocess.run([sys.executable, "-c", RUN, str(out), str(problem)], cwd=ROOT, capture_output=True,
                             text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
        said = ran.stdout.strip().splitlines()[-1:] if ran.returncode == 0 else []
        result.update(json.loads(said[0]) if said else {"error": None, "run_failed": ran.stderr.strip()[-300:]})
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("directory", type=Path, help="a directory of KernelBench-format problem files")
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--jobs", type=int, default=2, help="seeds compiled at once")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per problem")
    ap.add_argument("--out", type=Path, help="write every problem's result here as JSON")
    ap.add_argument("--block-ops", type=int, help="the capture's block_ops (0: every graph whole)")
    ap.add_argument("--run", action="store_true", help="cuda: run each seed beside its Model (error, ms)")
    args = ap.parse_args(argv)
    if args.run and args.device != "cuda":
        ap.error("--run needs --device cuda")
    problems = sorted(args.directory.glob("*.py"), key=natural)
    if not problems:
        print(f"seed_coverage: {args.directory}: no problem files", file=sys.stderr)
        return 2
    print(f"seed coverage: {len(problems)} problems in {args.directory}, device {args.device}, "
          f"{args.jobs} at a time, {args.timeout:g} s each", flush=True)
    results: list[dict] = []
    with ThreadPoolExecutor(args.jobs) as pool:
        for r in pool.map(lambda p: seed_one(p, args.device, args.timeout, args.block_ops, args.run), problems):
            results.append(r)
            ran = f", error {r['error']:.2e}, seed {r['seed_ms']:.2f} ms, eager {r['eager_ms']:.2f} ms" \
                if r.get("error") is not None else (f", run failed: {r['run_failed']}" if "run_failed" in r else "")
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
