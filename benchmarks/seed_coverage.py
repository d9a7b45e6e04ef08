"""Seed coverage: which problems of a directory get a pure-Triton Inductor seed, and how long each took.

Runs `python -m tools.dialect seed PROBLEM --device D` (torch.compile, conversion, the static
guards; nothing judged) for every problem file in DIR, JOBS at a time, each in its own process
with a time limit, and prints one line per problem as it ends, then the count of seeds and the
reasons for the rest. Nothing is cached: every seed is compiled now.

    python benchmarks/seed_coverage.py KernelBench/level3 --device cpu --jobs 2 --timeout 600 \\
        --out seed_coverage.json

On a CPU the seeds are converted, not run (Triton's interpreter is too slow for level-3
inputs); `krefine bench` judges them.
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


def seed_one(problem: Path, device: str, timeout_s: float) -> dict:
    """One problem's seed in a fresh process: {"problem", "seed": bool, "seconds", "reason"}."""
    t0 = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-m", "tools.dialect", "seed", str(problem), "--device", device],
                              cwd=ROOT, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return {"problem": problem.stem, "seed": False, "seconds": round(time.monotonic() - t0, 1),
                "reason": f"no seed within {timeout_s:g} s"}
    lines = [ln for ln in done.stderr.splitlines() if ln.startswith("kernelbook: ")] or \
        [ln for ln in done.stderr.splitlines() if ln.strip()][-1:] or [f"exit status {done.returncode}"]
    ok = done.returncode == 0 and "class ModelNew" in done.stdout
    return {"problem": problem.stem, "seed": ok, "seconds": round(time.monotonic() - t0, 1),
            "reason": "" if ok else lines[-1].removeprefix("kernelbook: ")[:300]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("directory", type=Path, help="a directory of KernelBench-format problem files")
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--jobs", type=int, default=2, help="seeds compiled at once")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per problem")
    ap.add_argument("--out", type=Path, help="write every problem's result here as JSON")
    args = ap.parse_args(argv)
    problems = sorted(args.directory.glob("*.py"), key=natural)
    if not problems:
        print(f"seed_coverage: {args.directory}: no problem files", file=sys.stderr)
        return 2
    print(f"seed coverage: {len(problems)} problems in {args.directory}, device {args.device}, "
          f"{args.jobs} at a time, {args.timeout:g} s each", flush=True)
    results: list[dict] = []
    with ThreadPoolExecutor(args.jobs) as pool:
        for r in pool.map(lambda p: seed_one(p, args.device, args.timeout), problems):
            results.append(r)
            print(f"[{len(results)}/{len(problems)}] {r['problem']}: {'seed' if r['seed'] else 'no seed: ' + r['reason']}"
                  f" ({r['seconds']:.0f} s)", flush=True)
    seeded = [r for r in results if r["seed"]]
    total = sum(r["seconds"] for r in results)
    print(f"seeds: {len(seeded)}/{len(results)}; {total / 60:.1f} min in all, median "
          f"{sorted(r['seconds'] for r in results)[len(results) // 2]:.0f} s a problem")
    for r in results:
        if not r["seed"]:
            print(f"  no seed: {r['problem']}: {r['reason']}")
    if args.out:
        args.out.write_text(json.dumps({"directory": str(args.directory), "device": args.device,
                                        "timeout_s": args.timeout, "results": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
