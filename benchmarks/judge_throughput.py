"""Judge throughput (issue 9, P1 and P2) beside KernelBench's evaluator, in one run.

P1, per-candidate wall for correct, incorrect, compile-error and statically rejected
candidates of small problems (benchmarks/throughput/) and KernelBench level-1 problems
of real size (benchmarks/candidates/kb_*.py):

  session     one tools.judge.Judge per problem; each candidate judged in turn after
              the session is warm (the first candidate's wall, which builds the
              reference and compiles the torch.compile baseline, is reported apart)
  batch       the same candidates handed to Judge.judge_many at once (compile phases
              overlap): wall / candidates
  standalone  `krefine eval --json` in a fresh process per candidate (--before DIR:
              the same with an older checkout's agent/ and tools/, for before/after)
  kb_fresh    KernelBench eval_kernel_against_ref (5 correct + 100 perf trials) in a
              fresh process per candidate
  kb_session  the same, one process for all candidates of a problem

P2, repeatability: one candidate judged --repeat times, each in a fresh process
(`krefine eval --json`): spread of the speedup over eager and compile.

  python3 benchmarks/judge_throughput.py --kb .kb --out $OUT/judge.json [--before .before]

KernelBench is not part of krefine: fetch it and pass its checkout (uncommitted).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
T = ROOT / "benchmarks" / "throughput"
KINDS = ("correct", "incorrect", "compile_error", "rejected")
SMALL = [("gate", ROOT / "examples" / "relu.py"), ("softmax", ROOT / "examples" / "softmax.py"),
         ("matmul", T / "odd_matmul.py")]
LARGE = [("kb_19_relu", "19_ReLU.py"), ("kb_1_matmul", "1_Square_matrix_multiplication_.py")]
# mid-size single-kernel forwards (tens to hundreds of us): the hand-written ReLU candidate
MID = [("relu_4096", T / "relu_4096.py"), ("relu_8192", T / "relu_8192.py")]


def cases(kb: Path | None) -> list[tuple[str, Path, list[tuple[str, Path]]]]:
    out = [(name, prob, [(k, T / f"{name}_{k}.py") for k in KINDS]) for name, prob in SMALL]
    out += [(name, prob, [("correct", ROOT / "benchmarks" / "candidates" / "kb_19_relu.py")]) for name, prob in MID]
    if kb is not None:
        for cand, kb_file in LARGE:
            out.append((cand, kb / "KernelBench" / "level1" / kb_file,
                        [("correct", ROOT / "benchmarks" / "candidates" / f"{cand}.py")]))
    return out


def session(prob: Path, cands: list[tuple[str, Path]]) -> dict:
    from tools.judge import Judge
    from tools.problem import load_problem
    problem = load_problem(prob)
    res = {}
    with Judge(problem, device="cuda") as judge:
        t = time.perf_counter()   # first: the session's reference, baseline compile, fork server
        v = judge.judge(cands[0][1].read_text(), profile=False)
        res["first_s"] = round(time.perf_counter() - t, 2)
        for kind, path in cands:
            t = time.perf_counter()
            v = judge.judge(path.read_text(), profile=False)
            res[kind] = {"wall_s": round(time.perf_counter() - t, 3), "verdict": v.status.value,
                         "speedup": [v.speedup_eager, v.speedup_compile],
                         "measure": v.checks.get("timing_measure"), "phase_s": v.checks.get("phase_s"),
                         "rounds": v.checks.get("timing_rounds"), "interval_eager": (v.speedup_interval or {}).get("eager")}
        batch = [(f"c{i}.py", p.read_text()) for i, (_, p) in enumerate(cands * 2)]
        t = time.perf_counter()
        verdicts = judge.judge_many(batch, profile=False)
        res["batch"] = {"n": len(batch), "wall_s": round(time.perf_counter() - t, 2),
                        "per_candidate_s": round((time.perf_counter() - t) / len(batch), 3),
                        "verdicts": [v.status.value for v in verdicts],
                        "phase_s": [v.checks.get("phase_s") for v in verdicts]}
    # the standalone runs that follow are other processes: give them this one's GPU memory
    import gc
    import torch
    del judge
    gc.collect()
    torch.cuda.empty_cache()
    return res


def standalone(prob: Path, cand: Path, code_root: Path) -> dict:
    # the root's own agent/ and tools/ first; the rest of the path (installed wheels) after it
    # KREFINE_KEEP_JUDGE_S=0: judged in the fresh process itself, no warm judge service
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, (str(code_root), os.environ.get("PYTHONPATH")))),
               KREFINE_KEEP_JUDGE_S="0")
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "agent.cli", "eval", str(prob), str(cand), "--json", "--no-profile"],
                       capture_output=True, text=True, env=env, cwd=code_root, timeout=600)
    wall = time.perf_counter() - t
    try:
        d = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"wall_s": round(wall, 2), "rc": p.returncode, "error": p.stderr[-300:]}
    return {"wall_s": round(wall, 2), "rc": p.returncode, "verdict": d["verdict"],
            "speedup": [d["speedup"]["eager"], d["speedup"]["compile"]],
            "interval_eager": [(d.get("speedup_interval") or {}).get("eager", {}).get(k) for k in ("low", "high")],
            "measure": d["checks"].get("timing_measure"), "phase_s": d["checks"].get("phase_s"),
            "rounds": d["checks"].get("timing_rounds"),
            "judge_s": d.get("duration_s"), "session_s": d["checks"].get("session_s"),
            "timed_ms": ((d.get("timing_ms") or {}).get("candidate") or {}).get("median")}


def kb_fresh(kb: Path, prob: Path, cand: Path) -> dict:
    t = time.perf_counter()
    p = subprocess.run([sys.executable, __file__, "--kb-one", str(kb), str(prob), str(cand)],
                       capture_output=True, text=True, timeout=600)
    wall = time.perf_counter() - t
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    d = json.loads(lines[-1]) if lines else {"error": p.stderr[-300:]}
    return {"wall_s": round(wall, 2), **{k: d.get(k) for k in ("correctness", "speedup", "error") if k in d}}


def kb_one(kb: Path, prob: Path, cand: Path) -> dict:
    """KernelBench's eval_kernel_against_ref and its reference timing, as its scripts call them."""
    from agent.bench.kb_eval import stub_llm_imports
    sys.path.insert(0, str(kb / "src"))
    stub_llm_imports()
    import torch
    from kernelbench.eval import eval_kernel_against_ref
    from kernelbench.timing import measure_ref_program_time
    ref_src, cand_src = prob.read_text(), cand.read_text()
    t = time.perf_counter()
    res = eval_kernel_against_ref(ref_src, cand_src, num_correct_trials=5, num_perf_trials=100,
                                  measure_performance=True, backend="triton", device=torch.device("cuda:0"))
    ref = measure_ref_program_time(prob.stem, ref_src, num_trials=100, device=torch.device("cuda:0"))
    wall = time.perf_counter() - t
    runtime, ref_mean = getattr(res, "runtime", -1.0), (ref or {}).get("mean")
    return {"correctness": bool(getattr(res, "correctness", False)), "wall_s": round(wall, 2),
            "speedup": (ref_mean / runtime) if runtime and runtime > 0 and ref_mean else None}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kb", type=Path, default=None)
    ap.add_argument("--out", default=None)
    ap.add_argument("--before", type=Path, default=None, help="an older checkout for standalone before/after")
    ap.add_argument("--before-first", action="store_true", help="standalone: the older checkout first")
    ap.add_argument("--before-only", default="", help="comma-separated case names --before applies to")
    ap.add_argument("--only", default="", help="comma-separated case names")
    ap.add_argument("--stages", default="session,standalone,kb", help="session,standalone,kb,repeat")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--again", action="store_true", help="standalone: judge the correct candidate a second time")
    ap.add_argument("--kb-modes", default="fresh,session", help="fresh,session: KernelBench in a fresh "
                    "process per candidate and/or one process for a problem's candidates")
    ap.add_argument("--kb-one", nargs=3, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.kb_one:
        print(json.dumps(kb_one(*map(Path, args.kb_one))))
        return
    if args.out is None:
        ap.error("--out is required")
    if args.before_first and args.before is None:
        ap.error("--before-first orders a before/after pair: it needs --before")
    stages = set(args.stages.split(","))
    results: dict = {"cases": {}}
    for name, prob, cands in cases(args.kb):
        if args.only and name not in args.only.split(","):
            continue
        r = results["cases"][name] = {}
        if "session" in stages:
            r["session"] = session(prob, cands)
            print(name, "session", json.dumps(r["session"]), flush=True)
        if "standalone" in stages:
            with_before = args.before is not None and (not args.before_only or name in args.before_only.split(","))
            # the first of the two pays the on-disk caches (Triton's, Inductor's) both share:
            # --before-first swaps the order, so a before/after pair can be run both ways
            for which in (("before", "after") if args.before_first else ("after", "before")):
                if which == "after":
                    r["standalone"] = {k: standalone(prob, c, ROOT) for k, c in cands if k in ("correct", "rejected")}
                    if args.again:   # again: the torch.compile baseline now comes from Inductor's on-disk caches
                        r["standalone"]["correct_again"] = standalone(prob, dict(cands)["correct"], ROOT)
                elif with_before:
                    r["before"] = {k: standalone(prob, c, args.before.resolve()) for k, c in cands
                                   if k in ("correct", "rejected")}
            print(name, "standalone", json.dumps({k: r[k] for k in ("standalone", "before") if k in r}), flush=True)
        if "kb" in stages and args.kb is not None:
            modes = set(args.kb_modes.split(","))
            if "fresh" in modes:
                r["kb_fresh"] = {k: kb_fresh(args.kb, prob, c) for k, c in cands if k == "correct"}
            if "session" in modes:
                t = time.perf_counter()
                got = {k: kb_one(args.kb, prob, c) for k, c in cands if k != "rejected"}
                r["kb_session"] = {"per_candidate_s": round((time.perf_counter() - t) / len(got), 3), "runs": got}
            print(name, "kb", json.dumps({k: r[k] for k in ("kb_fresh", "kb_session") if k in r}), flush=True)
        if "repeat" in stages:
            runs = [standalone(prob, dict(cands)["correct"], ROOT) for _ in range(args.repeat)]
            sp = [x["speedup"][0] for x in runs if x.get("speedup") and x["speedup"][0]]
            spc = [x["speedup"][1] for x in runs if x.get("speedup") and x["speedup"][1]]
            spread = lambda v: (max(v) - min(v)) / statistics.median(v) if v else None  # noqa: E731
            r["repeat"] = {"speedup_eager": sp, "speedup_compile": spc, "spread_eager": spread(sp),
                           "spread_compile": spread(spc), "measures": [x.get("measure") for x in runs]}
            print(name, "repeat", json.dumps(r["repeat"]), flush=True)
        Path(args.out).write_text(json.dumps(results, indent=1))
    print_tables(results)


def print_tables(results: dict) -> None:
    """Markdown: per-candidate wall by kind and way of judging, KernelBench beside it."""
    print("\n| case | kind | verdict | session s | batch s/cand | standalone s | KB fresh s | KB session s | "
          "session / KB fresh | measure | speedup eager / compile |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, r in results["cases"].items():
        sess, alone = r.get("session", {}), r.get("standalone", {})
        kb_f, kb_s = r.get("kb_fresh", {}), (r.get("kb_session") or {}).get("runs", {})
        for kind in KINDS:
            row = sess.get(kind)
            if row is None and kind not in alone:
                continue
            row = row or {}
            kbw = (kb_f.get(kind) or {}).get("wall_s")
            sw = row.get("wall_s")
            sp = row.get("speedup") or [None, None]
            print(f"| {name} | {kind} | {row.get('verdict', '-')} | {_f(sw)} | "
                  f"{_f((sess.get('batch') or {}).get('per_candidate_s')) if kind == 'correct' else ''} | "
                  f"{_f((alone.get(kind) or {}).get('wall_s'))} | {_f(kbw)} | {_f((kb_s.get(kind) or {}).get('wall_s'))} | "
                  f"{_f(sw / kbw) if sw and kbw else '-'} | {row.get('measure') or '-'} | "
                  f"{_f(sp[0])} / {_f(sp[1])} |")
        if "before" in r:
            for kind, b in r["before"].items():
                print(f"| {name} (before) | {kind} | {b.get('verdict', '-')} | | | {_f(b.get('wall_s'))} | | | | | |")
        if "repeat" in r:
            rep = r["repeat"]
            print(f"| {name} (repeat x{len(rep['speedup_eager'])}) | correct | | | | | | | | "
                  f"{','.join(sorted(set(str(m) for m in rep['measures'])))} | spread {_f(rep['spread_eager'])} / "
                  f"{_f(rep['spread_compile'])} |")


def _f(x) -> str:
    return f"{x:.3g}" if isinstance(x, (int, float)) else "-"


if __name__ == "__main__":
    main()
