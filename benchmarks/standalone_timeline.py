"""Where a standalone `krefine eval` spends its wall time, mark by mark (issue 9, P1).

Runs `krefine eval PROBLEM CANDIDATE --json --no-profile` in fresh processes with the
judge's steps wrapped (this script's `--inner` mode): every step's start and end is
printed on stderr with the system's monotonic clock, so the driver can place them
against its own spawn and exit times. Also times, each in a fresh process, what any
process pays before it judges (python, `import torch`, CUDA context, triton, the fork
server's imports), and KernelBench's `eval_kernel_against_ref` in a fresh process on
the same candidate when --kb is given.

  python3 benchmarks/standalone_timeline.py --out $OUT/timeline.json [--kb .kb] [--runs 3]
      [--problem examples/relu.py --cand benchmarks/throughput/gate_correct.py ...]
      [--variants default,no_compile_baseline,rejected,service]
  python3 benchmarks/standalone_timeline.py --out $OUT/cases.json --kb .kb --variants cases \
      --cases gate,softmax,matmul,kb_1_matmul

Variants: "default" and "no_compile_baseline" judge in the eval process (--keep-judge 0),
marked step by step; "rejected" is a static reject as a user runs it; "service" is the
judge service (tools/judge/service.py) in a private directory: the first eval starts it
(cold), the next --runs evals find the problem's session warm, then one eval of
--other-problem (a new session in the warm service). "cases": for each of --cases
(benchmarks/judge_throughput.py's names), in one warm service, the problem's first eval
(a new session) and --runs more, each beside KernelBench's fresh-process wall on the same
candidate (two runs), all in one run; the service is started (cold) by the first case.

Prints one Markdown table per run (mark, seconds since spawn) and a summary table.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]

SNIPPETS = {
    "python": "pass",
    "import_torch": "import torch",
    "torch_cuda_init": "import torch; torch.zeros(1, device='cuda'); torch.cuda.synchronize()",
    "torch_triton": "import torch, triton, triton.language",
    "forkserver_imports": "import torch, triton, triton.language\n"
                          "from tools import problem\nfrom tools.sandbox import channel, cudaipc, worker\n"
                          "from tools.perf import profiler, timer\n"
                          "from tools.sandbox.forkserver import _warm_lazy_imports; _warm_lazy_imports()",
    "import_cli": "import agent.cli, agent.cli.evalcmd",
}


def _mark(label: str) -> None:
    print(f"MARK {time.monotonic():.6f} {label}", file=sys.stderr, flush=True)


def _wrap(owner, name: str, label: str, *, once: bool = False) -> None:
    fn = getattr(owner, name)
    seen = [False]

    def wrapped(*a, **k):
        quiet = once and seen[0]
        seen[0] = True
        if not quiet:
            _mark(f"{label} start")
        try:
            return fn(*a, **k)
        finally:
            if not quiet:
                _mark(f"{label} end")
    setattr(owner, name, wrapped)


def inner(argv: list[str]) -> int:
    """`krefine eval` with its steps marked (runs in the measured process)."""
    _mark("python up")
    import atexit
    atexit.register(_mark, "atexit")
    import agent.cli as cli
    import agent.cli.evalcmd as evalcmd
    _mark("cli imported")
    import tools.problem as problem
    import tools.judge.pipeline as pipeline
    import tools.judge.session as service
    import tools.judge.static as static
    import tools.sandbox.forkserver as forkserver
    import tools.sandbox.isolation as isolation
    _wrap(evalcmd, "_early_forkserver", "spawn fork server")
    _wrap(problem, "load_problem", "load problem")
    _wrap(static, "static_verdict", "static guards")
    _wrap(service.Judge, "check_device", "device check", once=True)
    _wrap(service.Judge, "reference_model", "reference model", once=True)
    _wrap(service.Judge, "reference", "reference outputs")
    _wrap(service.Judge, "_compile_baseline", "torch.compile baseline (thread)")
    _wrap(service.Judge, "compiled_baseline", "wait for compiled baseline")
    _wrap(forkserver.ForkServer, "wait_ready", "wait for fork server", once=True)
    _wrap(isolation, "start_worker", "fork worker")
    _wrap(pipeline, "compile_phase", "compile phase")
    _wrap(pipeline, "run_trials", "test phase")
    _wrap(pipeline, "time_candidate", "time phase")
    _wrap(pipeline, "profile_candidate", "profile step")
    _wrap(evalcmd, "_report", "print verdict")
    _wrap(service.Judge, "close", "close session")
    try:
        return cli.main(argv)
    finally:
        _mark("main returned")


def run_eval(problem: str, cand: str, config: str | None, *, keep: str = "0", env_extra: dict | None = None) -> dict:
    cmd = [sys.executable, __file__, "--inner", "eval", problem, cand, "--json", "--no-profile", "--keep-judge", keep]
    if config:
        cmd += ["--config", config]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH")))),
               **(env_extra or {}))
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO, timeout=600)
    end = time.monotonic() - t0
    marks = []
    for ln in p.stderr.splitlines():
        if ln.startswith("MARK "):
            _, t, label = ln.split(" ", 2)
            marks.append((label, round(float(t) - t0, 3)))
    marks.append(("process exited", round(end, 3)))
    out = {"wall_s": round(end, 3), "rc": p.returncode, "marks": marks}
    try:
        d = json.loads(p.stdout.strip().splitlines()[-1])
        out.update(verdict=d["verdict"], duration_s=d.get("duration_s"),
                   phase_s=d["checks"].get("phase_s"), session_s=d["checks"].get("session_s"),
                   speedup=d.get("speedup"), judge_service=d["checks"].get("judge_service"))
    except (ValueError, IndexError, KeyError):
        out["error"] = p.stderr[-600:]
    return out


def service_cases(args, service_env: dict, save, table: dict) -> None:
    """Per case: the service's first eval of the problem, --runs warm evals, KernelBench
    fresh twice; one Markdown row each."""
    from judge_throughput import cases, kb_fresh
    wanted = args.cases.split(",")
    print("\n| case | first eval s | warm evals s | KB fresh s | warm / KB (worst) | verdicts ours / KB |\n"
          "|---|---|---|---|---|---|", flush=True)
    rows = {name: (prob, dict(cands)["correct"]) for name, prob, cands in cases(args.kb) if name in wanted}
    for name in wanted:
        prob, cand = rows[name]
        first = run_eval(str(prob), str(cand), None, keep="300", env_extra=service_env)
        warm = [run_eval(str(prob), str(cand), None, keep="300", env_extra=service_env) for _ in range(args.runs)]
        kb = [kb_fresh(args.kb, prob, cand) for _ in range(2)] if args.kb else []
        table[name] = {"first": first, "warm": warm, "kb_fresh": kb}
        save()
        w = [r["wall_s"] for r in warm]
        k = [r.get("wall_s") for r in kb if r.get("wall_s")] or [float("nan")]
        svc = first.get("judge_service") or {}
        print(f"| {name} | {first['wall_s']:.2f} ({'cold service' if svc.get('started_now') else 'new session'}) | "
              f"{min(w):.2f}-{max(w):.2f} | {', '.join(f'{x:.2f}' for x in k)} | "
              f"{max(w) / min(k):.2f} | {warm[-1].get('verdict')} / "
              f"{[x.get('correctness') for x in kb]} |", flush=True)


def snippet(code: str, device_env: dict) -> float:
    t = time.monotonic()
    subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, cwd=REPO,
                   env=device_env, timeout=300)
    return round(time.monotonic() - t, 3)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--inner":
        sys.exit(inner(sys.argv[2:]))
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--kb", type=Path, default=None)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--problem", default="examples/relu.py")
    ap.add_argument("--cand", default="benchmarks/throughput/gate_correct.py")
    ap.add_argument("--rejected", default="benchmarks/throughput/gate_rejected.py")
    ap.add_argument("--other-problem", default="examples/softmax.py")
    ap.add_argument("--other-cand", default="benchmarks/throughput/softmax_correct.py")
    ap.add_argument("--variants", default="default,no_compile_baseline,rejected,service")
    ap.add_argument("--snippets", default=",".join(SNIPPETS))
    ap.add_argument("--cases", default="gate,softmax,matmul", help="for --variants cases")
    args = ap.parse_args()
    res: dict = {"snippets": {}, "runs": {}, "kb_fresh": []}
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH")))))

    def save():
        Path(args.out).write_text(json.dumps(res, indent=1))
    for name in filter(None, args.snippets.split(",")):
        res["snippets"][name] = [snippet(SNIPPETS[name], env) for _ in range(2)]
        print(f"snippet {name}: {res['snippets'][name]} s", flush=True)
        save()
    no_baseline = Path(tempfile.mkdtemp()) / "no_baseline.toml"
    no_baseline.write_text("[timing]\ncompile_baseline = false\n")
    service_dir = Path(tempfile.mkdtemp(prefix="kj", dir="/tmp")) / "s"
    service_env = {"KREFINE_JUDGE_DIR": str(service_dir)}

    def show(variant, i, r):
        print(f"\n### {variant} run {i + 1}: wall {r['wall_s']} s, verdict {r.get('verdict')}, "
              f"phase_s {r.get('phase_s')}, session_s {r.get('session_s')}, service {r.get('judge_service')}", flush=True)
        print("| mark | s since spawn |\n|---|---|")
        for label, t in r["marks"]:
            print(f"| {label} | {t:.3f} |")
        if "error" in r:
            print("error:", r["error"])
    for variant in filter(None, args.variants.split(",")):
        if variant == "cases":
            try:
                service_cases(args, service_env, save, res.setdefault("cases", {}))
            finally:
                subprocess.run([sys.executable, "-m", "agent.cli", "judge", "stop"],
                               env={**os.environ, **service_env}, cwd=REPO, capture_output=True)
            continue
        if variant == "service":
            plan = [("service cold", args.problem, args.cand)] + \
                   [("service warm", args.problem, args.cand)] * args.runs + \
                   [("service, new problem", args.other_problem, args.other_cand)]
            for i, (label, prob, cand) in enumerate(plan):
                r = run_eval(prob, cand, None, keep="120", env_extra=service_env)
                res["runs"].setdefault(label, []).append(r)
                show(label, i, r)
                save()
            subprocess.run([sys.executable, "-m", "agent.cli", "judge", "stop"], env={**os.environ, **service_env},
                           cwd=REPO, capture_output=True)
            continue
        cand = args.rejected if variant == "rejected" else args.cand
        config = str(no_baseline) if variant == "no_compile_baseline" else None
        runs = res["runs"].setdefault(variant, [])
        for i in range(args.runs if variant == "default" else 1):
            r = run_eval(args.problem, cand, config, keep="120" if variant == "rejected" else "0",
                         env_extra=service_env)
            runs.append(r)
            show(variant, i, r)
            save()
    if args.kb:
        from judge_throughput import kb_fresh
        for _ in range(2):
            res["kb_fresh"].append(kb_fresh(args.kb, REPO / args.problem, REPO / args.cand))
            print(f"KernelBench fresh: {res['kb_fresh'][-1]}", flush=True)
            save()
    print("\n| run | wall s |\n|---|---|")
    for variant, runs in res["runs"].items():
        for i, r in enumerate(runs):
            print(f"| {variant} {i + 1} | {r['wall_s']} |")
    for r in res["kb_fresh"]:
        print(f"| KernelBench fresh | {r.get('wall_s')} |")


if __name__ == "__main__":
    main()
