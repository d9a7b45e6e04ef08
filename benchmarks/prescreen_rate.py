"""Variants pre-screened per second with and without the parallel compile pass, beside the
cost of one full judgement, on a GPU (issue 31, item 3: "≥ 50 variants per problem for less
than the cost of 2 full judgements").

For each PROBLEM:CANDIDATE pair, the loop's own variant maker (agent/search/sweep.py,
`sweep_variants(..., wide=True)`, as agent/loop/sweep_plan.py calls it) writes up to
--variants variants of the candidate; tools/judge/prescreen.py screens [candidate, *variants]
with the compile pass off (jobs=1: the worker compiles each variant in turn, as before) and
on (jobs=None: tools/judge/precompile.py's automatic width), alternating, each run in a Triton
cache of its own (nothing carried between runs). The full judgement's cost is the candidate
judged twice in a judge session of its own (tools/judge/session.py `Judge.judge`), the
second verdict's duration_s (the judge's wall from start to verdict).

  python3 benchmarks/prescreen_rate.py --out $OUT/prescreen_rate.json \\
      .kb/level1/1_Square_matrix_multiplication_.py:CANDIDATE.py ... [--variants 48] [--alternations 2]
"""
from __future__ import annotations

import argparse
import json
import secrets
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("pairs", nargs="+", help="PROBLEM.py:CANDIDATE.py")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--variants", type=int, default=48)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--alternations", type=int, default=1)
    args = ap.parse_args()
    from agent.search.sweep import sweep_variants
    from tools.judge.precompile import compile_jobs
    from tools.judge.prescreen import prescreen
    from tools.judge.session import Judge
    from tools.problem import load_problem
    from tools.settings import EvalSettings
    import tools.judge.precompile as pc
    passes: list = []
    opened = pc.CompilePass.__init__

    def kept(self, *a, **kw):
        opened(self, *a, **kw)
        passes.append(self)
    pc.CompilePass.__init__ = kept
    results = {"date": time.strftime("%Y-%m-%d"), "variants": args.variants, "rows": []}
    for pair in args.pairs:
        problem, candidate = (Path(p) for p in pair.split(":"))
        src = candidate.read_text(encoding="utf-8")
        sources = [src, *(v.source for v in sweep_variants(src, args.variants, wide=True))]
        row = {"problem": problem.name, "variants": len(sources) - 1, "jobs_auto": compile_jobs(len(sources)),
               "runs": []}
        settings = EvalSettings()
        for a in range(args.alternations):
            for jobs in (1, None):
                passes.clear()
                t = time.perf_counter()
                screens = prescreen(problem, sources, device="cuda", settings=settings.test,
                                    seed=secrets.randbelow(2**31 - 1), gpu_index=0, reps=args.reps,
                                    timeout_s=settings.test.compile_timeout_s, jobs=jobs)
                wall = time.perf_counter() - t
                run = {"jobs": "auto" if jobs is None else jobs, "alternation": a, "wall_s": round(wall, 2),
                       "variants_per_s": round(len(sources) / wall, 3),
                       "worker_variant_s": round(sum(s.seconds for s in screens), 2),
                       "statuses": [s.status for s in screens]}
                if passes:                      # what the compile pass reached and compiled
                    rows = passes[0].wait()
                    run["pass"] = {"seconds": round(passes[0].seconds, 2), "variants": len(rows),
                                   "launches": sum(r["launches"] for r in rows),
                                   "compiled": sum(r["compiled"] for r in rows),
                                   "errors": sorted({r["error"] for r in rows if r["error"]})[:3]}
                print(json.dumps({"problem": problem.name, **{k: v for k, v in run.items() if k != "statuses"}}),
                      flush=True)
                row["runs"].append(run)
        judge = Judge(load_problem(problem), device="cuda", settings=settings)
        try:
            judge.judge(src, candidate_name=candidate.name)      # the session's first (its workers start)
            verdict = judge.judge(src, candidate_name=candidate.name)
        finally:
            judge.close()
        row["judgement"] = {"status": str(verdict.status.value), "duration_s": verdict.duration_s}
        off = [r["wall_s"] for r in row["runs"] if r["jobs"] == 1]
        on = [r["wall_s"] for r in row["runs"] if r["jobs"] == "auto"]
        row["statuses_agree"] = len({tuple(r["statuses"]) for r in row["runs"]}) == 1
        row["wall_off_s"], row["wall_on_s"] = sum(off) / len(off), sum(on) / len(on)
        row["on_vs_two_judgements"] = round(row["wall_on_s"] / (2 * verdict.duration_s), 3)
        print(json.dumps({k: v for k, v in row.items() if k != "runs"}), flush=True)
        results["rows"].append(row)
        args.out.write_text(json.dumps(results, indent=1))
    print("| problem | variants | jobs | pre-screen wall, compile pass off | on | variants/s off | on "
          "| one judgement | on / 2 judgements | statuses agree |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results["rows"]:
        n = r["variants"] + 1
        print(f"| {r['problem']} | {r['variants']} | {r['jobs_auto']} | {r['wall_off_s']:.1f} s | {r['wall_on_s']:.1f} s "
              f"| {n / r['wall_off_s']:.2f} | {n / r['wall_on_s']:.2f} | {r['judgement']['duration_s']:.1f} s "
              f"({r['judgement']['status']}) | {r['on_vs_two_judgements']:.2f} | {r['statuses_agree']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
