"""Evaluator throughput and repeatability on the GPU, beside KernelBench's evaluator.

For each (KernelBench problem, hand-written Triton candidate) pair: wall time of one
`tools.judge.evaluate` call, cold (first in this process) and warm (second), and the
same for KernelBench's `eval_kernel_against_ref` (+ its reference timing) when a
KernelBench `src/` is given. Then one candidate evaluated N times: the spread of its
speedup. Results go to --out as JSON and are printed as a Markdown table.

  python benchmarks/eval_throughput.py --kb .kb --out $OUT/eval_throughput.json

KernelBench is not part of krefine: fetch it and pass its checkout (uncommitted).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from kb_eval import stub_llm_imports  # noqa: E402

PAIRS = [  # (KernelBench level1 file, our candidate)
    ("19_ReLU.py", "kb_19_relu.py"),
    ("23_Softmax.py", "kb_23_softmax.py"),
    ("1_Square_matrix_multiplication_.py", "kb_1_matmul.py"),
]


def ours(problem_path: Path, cand_path: Path, transfer: str = "auto") -> dict:
    import dataclasses
    from tools.judge import evaluate
    from tools.problem import load_problem
    from tools.settings import EvalSettings
    s = EvalSettings()
    s = dataclasses.replace(s, test=dataclasses.replace(s.test, output_transfer=transfer))
    t = time.perf_counter()
    v = evaluate(load_problem(problem_path), cand_path.read_text(), device="cuda", settings=s,
                 profile=False)
    wall = time.perf_counter() - t
    cand = v.timing.get("candidate")
    return {"wall_s": round(wall, 2), "verdict": v.status.value, "speedup_eager": v.speedup_eager,
            "speedup_compile": v.speedup_compile, "candidate_ms": cand.median_ms if cand else None,
            "phase_s": v.checks.get("phase_s"), "flags": list(v.flags),
            "output_transfer": v.checks.get("output_transfer"),
            "diagnostics": [d.message[:200] for d in v.diagnostics]}


def kernelbench(kb_src: Path, problem_path: Path, cand_path: Path) -> dict:
    sys.path.insert(0, str(kb_src))
    stub_llm_imports()
    import torch
    from kernelbench.eval import eval_kernel_against_ref
    from kernelbench.timing import measure_ref_program_time
    ref_src, cand_src = problem_path.read_text(), cand_path.read_text()
    t = time.perf_counter()
    res = eval_kernel_against_ref(ref_src, cand_src, num_correct_trials=5, num_perf_trials=100,
                                  measure_performance=True, backend="triton",
                                  device=torch.device("cuda:0"))
    ref = measure_ref_program_time(problem_path.stem, ref_src, num_trials=100,
                                   device=torch.device("cuda:0"))
    wall = time.perf_counter() - t
    runtime = getattr(res, "runtime", -1.0)
    ref_mean = (ref or {}).get("mean")
    return {"wall_s": round(wall, 2), "correct": bool(getattr(res, "correctness", False)),
            "runtime_ms": runtime, "ref_ms": ref_mean,
            "speedup_eager": (ref_mean / runtime) if runtime and runtime > 0 and ref_mean else None}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kb", type=Path, default=None, help="KernelBench checkout (has src/ and KernelBench/)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--only", default="", help="substring filter on problem names")
    ap.add_argument("--repeat-on", default="", help="substring of the problem evaluated --repeat "
                    "times (default: the first selected)")
    ap.add_argument("--no-side-by-side", action="store_true", help="only the repeatability runs")
    ap.add_argument("--compare-transfer", action="store_true", help="per selected problem: a warm-up "
                    "evaluation, then one with outputs through the pipe and one through CUDA IPC")
    args = ap.parse_args()
    import torch
    from tools.perf.gpuinfo import gpu_state
    gpu = gpu_state(0)
    problems = args.kb / "KernelBench" / "level1"
    cands = ROOT / "benchmarks" / "candidates"
    results = {"gpu": gpu, "date": time.strftime("%Y-%m-%d"), "torch": torch.__version__,
               "pairs": [], "repeatability": None}
    selected = [(p, c) for p, c in PAIRS if args.only in p]
    if not selected:
        ap.error(f"--only {args.only!r} selects none of {[p for p, _ in PAIRS]}")
    for prob, cand in ([] if args.no_side_by_side else selected):
        row = {"problem": prob, "candidate": cand}
        row["ours_cold"] = ours(problems / prob, cands / cand)
        row["ours_warm"] = ours(problems / prob, cands / cand)
        print(json.dumps(row), flush=True)
        if (args.kb / "src").is_dir():
            for label in ("kb_cold", "kb_warm"):
                try:
                    row[label] = kernelbench(args.kb / "src", problems / prob, cands / cand)
                except Exception as e:  # report KernelBench's failure, keep measuring ours
                    row[label] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
                print(json.dumps({label: row[label]}), flush=True)
        results["pairs"].append(row)
        args.out.write_text(json.dumps(results, indent=2))
    if args.compare_transfer:
        results["transfer"] = []
        for prob, cand in selected:
            ours(problems / prob, cands / cand)  # warm-up: torch.compile, allocator, caches
            row = {"problem": prob, "pipe": ours(problems / prob, cands / cand, "pipe"),
                   "auto": ours(problems / prob, cands / cand, "auto")}
            print(json.dumps(row), flush=True)
            results["transfer"].append(row)
            args.out.write_text(json.dumps(results, indent=2))
    # repeatability: one candidate, N evaluations, spread of the speedup
    prob, cand = next(((p, c) for p, c in selected if args.repeat_on in p), selected[0])
    runs = []
    for i in range(args.repeat):
        runs.append(ours(problems / prob, cands / cand))
        print(f"repeat {i + 1}/{args.repeat}: {json.dumps(runs[-1])}", flush=True)
    sp = [r["speedup_eager"] for r in runs if r["speedup_eager"]]
    results["repeatability"] = {
        "problem": prob, "speedups": sp,
        "median": statistics.median(sp) if sp else None,
        "min": min(sp) if sp else None, "max": max(sp) if sp else None,
        "rel_spread": (max(sp) - min(sp)) / statistics.median(sp) if sp else None,
        "candidate_ms": [r["candidate_ms"] for r in runs],
        "wall_s": [r["wall_s"] for r in runs]}
    args.out.write_text(json.dumps(results, indent=2))
    print("\n| problem | ours cold s | ours warm s | KB cold s | KB warm s | ours speedup | KB speedup |")
    print("|---|---|---|---|---|---|---|")
    for r in results["pairs"]:
        kbc, kbw = r.get("kb_cold", {}), r.get("kb_warm", {})
        print(f"| {r['problem']} | {r['ours_cold']['wall_s']} | {r['ours_warm']['wall_s']} | "
              f"{kbc.get('wall_s', '-')} | {kbw.get('wall_s', '-')} | "
              f"{_f(r['ours_warm']['speedup_eager'])} | {_f(kbw.get('speedup_eager'))} |")
    print(f"\nrepeatability ({prob}, {args.repeat} runs): {results['repeatability']}")
    return 0


def _f(x):
    return f"{x:.3f}" if isinstance(x, (int, float)) else "-"


if __name__ == "__main__":
    sys.exit(main())
