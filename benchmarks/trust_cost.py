"""What the output-ownership and timed-path checks cost a warm evaluation, on a GPU.

For each problem, one correct candidate is judged in a warm judge session of this
checkout and of an older one (--before DIR: a checkout without the checks, e.g.
`git worktree add .before <commit>`), each session in its own process, alternately
(this, before, this, before), `--evals` judgements per session after one warm-up.
Reported per problem and checkout: the judge wall per candidate (median), the test and
time phases, and the verdict; then the ratio this / before.

  python3 benchmarks/trust_cost.py --before .before --out $OUT/trust_cost.json [--kb .kb]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
T = ROOT / "benchmarks" / "throughput"
CASES = [("relu_small", ROOT / "examples" / "relu.py", T / "gate_correct.py"),
         ("matmul_odd", T / "odd_matmul.py", T / "matmul_correct.py"),
         ("relu_8192", T / "relu_8192.py", ROOT / "benchmarks" / "candidates" / "kb_19_relu.py")]
KB_CASES = [("kb_19_relu", "level1/19_ReLU.py", ROOT / "benchmarks" / "candidates" / "kb_19_relu.py")]

SESSION = r'''
import json, sys, time
sys.path.insert(0, sys.argv[1])
from tools.judge import Judge
from tools.problem import load_problem
problem, src, n = load_problem(sys.argv[2]), open(sys.argv[3]).read(), int(sys.argv[4])
judge = Judge(problem, device="cuda")
try:
    judge.judge(src, candidate_name="candidate.py", profile=False)   # warm-up: reference, baseline compile
    walls, phases, status = [], [], None
    for _ in range(n):
        t = time.monotonic()
        v = judge.judge(src, candidate_name="candidate.py", profile=False)
        walls.append(time.monotonic() - t)
        phases.append(v.checks.get("phase_s", {}))
        status = v.status.value
    print("RESULT " + json.dumps({"walls": walls, "phases": phases, "status": status,
                                  "speedup": v.speedup_eager}))
finally:
    judge.close()
'''


def session(checkout: Path, problem: Path, candidate: Path, n: int) -> dict:
    p = subprocess.run([sys.executable, "-c", SESSION, str(checkout), str(problem), str(candidate), str(n)],
                       capture_output=True, text=True, timeout=600, cwd=checkout)
    line = next((x for x in p.stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        return {"error": (p.stderr or p.stdout)[-800:]}
    return json.loads(line[len("RESULT "):])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", type=Path, required=True, help="an older checkout to compare with")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--kb", type=Path, help="a KernelBench checkout (its KernelBench/ folder)")
    ap.add_argument("--evals", type=int, default=4)
    ap.add_argument("--alternations", type=int, default=2)
    a = ap.parse_args()
    cases = list(CASES) + ([(n, a.kb / p, c) for n, p, c in KB_CASES] if a.kb else [])
    report = {}
    for name, problem, candidate in cases:
        runs: dict[str, list] = {"this": [], "before": []}
        for _ in range(a.alternations):
            for label, checkout in (("this", ROOT), ("before", a.before.resolve())):
                got = session(checkout, problem, candidate, a.evals)
                runs[label].append(got)
                print(f"{name} {label}: {got.get('status')} walls {[round(w, 2) for w in got.get('walls', [])]}"
                      f"{' ' + got['error'][-300:] if 'error' in got else ''}", flush=True)
        summary = {}
        for label, sessions in runs.items():
            walls = [w for s in sessions for w in s.get("walls", [])]
            tests = [p.get("test", 0.0) for s in sessions for p in s.get("phases", [])]
            times = [p.get("time", 0.0) for s in sessions for p in s.get("phases", [])]
            summary[label] = {"median_wall_s": statistics.median(walls) if walls else None,
                              "median_test_s": statistics.median(tests) if tests else None,
                              "median_time_s": statistics.median(times) if times else None,
                              "status": sorted({s.get("status") for s in sessions})}
        t, b = summary["this"]["median_wall_s"], summary["before"]["median_wall_s"]
        summary["ratio_wall"] = t / b if t and b else None
        report[name] = {"summary": summary, "runs": runs}
        print(f"{name}: this {t} s, before {b} s, ratio {summary['ratio_wall']}", flush=True)
    a.out.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
