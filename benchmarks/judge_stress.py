"""One judge service, many clients (issue 49): no request breaks another's verdict.

Every (problem, candidate) of benchmarks/judge_stress_cases.py is judged first alone
(one client, one `krefine eval --json` at a time, against one warm service: its verdict
and the single client's wall per candidate), then `--verdicts` evals are handed to
`--clients` clients at once, all against that one service on one device, the problems
mixed (more of them than the service keeps warm: sessions are made and closed while
others judge, as in the red-team rounds). Each eval under load must end as it did alone:
the same exit status (never 3), the same verdict and flags (the timing flags aside:
noisy_timing, excessive_speedup, timer_mismatch, below_roofline), and no baseline
capture or torch.compile baseline failing under load that did not fail alone (another
request's GPU work broke it).

  python3 benchmarks/judge_stress.py --out $OUT/judge_stress.json            # cuda: 8 x 200
  python3 benchmarks/judge_stress.py --device cpu --clients 3 --verdicts 12  # the CPU analogue
  python3 benchmarks/judge_stress.py --repo /tmp/old-checkout ...            # another commit's judge

Prints one line per eval as it ends, then a summary; writes every eval and the summary
as JSON (`--out`); exit status 1 when any eval under load differs from alone or is exit
3, 0 otherwise. `--repo` runs another checkout's CLI and judge (a `git worktree` of the
commit before a fix) with these cases: how often the fault shows there.
"""
from __future__ import annotations

import argparse
import json
import os
import queue
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from judge_stress_cases import KINDS, PROBLEMS, write_cases  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TIMING_FLAGS = {"noisy_timing", "excessive_speedup", "timer_mismatch", "below_roofline"}
EVAL_TIMEOUT_S = 900


def config_text(device: str) -> str:
    """A short judgement: two trials, two timing rounds (the checks all run, once)."""
    timing = {"warmup": 2, "rounds": 2, "iters_per_round": 5, "max_rounds": 2, "max_extra_s": 0.0,
              "host_check_iters": 5}
    ev = {"trials": 2, "run_timeout_s": 30.0, "gpu_cross_compile": False}
    lines = ["[eval]"] + [f"{k} = {json.dumps(v)}" for k, v in ev.items()]
    if device == "cuda":
        lines += ["[timing]"] + [f"{k} = {json.dumps(v)}" for k, v in timing.items()]
    return "\n".join(lines) + "\n"


def one_eval(repo: Path, env: dict, device: str, config: Path, keep_s: float,
             problem: Path, cand: Path) -> dict:
    """One `krefine eval --json` as a user runs it: exit status, verdict, wall."""
    t = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "agent.cli", "eval", str(problem), str(cand), "--json",
                        "--no-profile", "--device", device, "--keep-judge", str(keep_s), "--config", str(config)],
                       cwd=repo, env=env, capture_output=True, text=True, timeout=EVAL_TIMEOUT_S)
    row = {"rc": r.returncode, "wall_s": round(time.monotonic() - t, 3)}
    docs = [json.loads(ln) for ln in r.stdout.splitlines() if ln.startswith("{")]
    if not docs:
        return {**row, "error": r.stderr.strip()[-500:]}
    v = docs[-1]
    checks = v.get("checks") or {}
    failed = checks.get("graph_capture_failed") or {}
    return {**row, "verdict": v["verdict"], "flags": sorted(set(v.get("flags") or ()) - TIMING_FLAGS),
            "measure": checks.get("timing_measure"),
            "baseline_capture_failed": sorted(k for k in failed if k != "candidate"),
            "compile_baseline_error": checks.get("compile_baseline_error"),
            "service_pid": (checks.get("judge_service") or {}).get("pid")}


def signature(row: dict) -> tuple:
    """What must be the same under load as alone."""
    return (row["rc"], row.get("verdict"), tuple(row.get("flags") or ()), tuple(row.get("baseline_capture_failed") or ()),
            bool(row.get("compile_baseline_error")))


def service_stats(repo: Path, env: dict) -> list:
    """The services' own report (pid, sessions, the capture guard's waits, where it has one)."""
    code = ("import json\nfrom tools.judge import client\n"
            "print(json.dumps([client.ping(p) for p in client.services()]))")
    r = subprocess.run([sys.executable, "-c", code], cwd=repo, env=env, capture_output=True, text=True, timeout=60)
    try:
        return json.loads(r.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return [{"error": r.stderr.strip()[-300:]}]


def walls(rows: list[dict]) -> dict:
    w = sorted(r["wall_s"] for r in rows)
    if not w:
        return {}
    return {"n": len(w), "median_s": round(statistics.median(w), 3),
            "p90_s": round(w[min(len(w) - 1, int(0.9 * len(w)))], 3), "max_s": round(w[-1], 3)}


def main() -> int:
    ap = argparse.ArgumentParser(prog="python3 benchmarks/judge_stress.py")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--verdicts", type=int, default=200, help="evals under load, in all")
    ap.add_argument("--problems", type=int, default=len(PROBLEMS), help=f"at most {len(PROBLEMS)}")
    ap.add_argument("--kinds", default=",".join(KINDS), help="candidate kinds (judge_stress_cases.py)")
    ap.add_argument("--seed", type=int, default=0, help="the order of the evals under load")
    ap.add_argument("--repo", type=Path, default=ROOT, help="the checkout whose CLI and judge run")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    kinds = [k for k in a.kinds.split(",") if k]
    unknown = set(kinds) - set(KINDS)
    if unknown or not kinds or not 1 <= a.problems <= len(PROBLEMS) or a.clients < 1 or a.verdicts < 1:
        ap.error(f"bad --kinds ({', '.join(sorted(unknown))}), --problems, --clients or --verdicts")
    repo = a.repo.resolve()

    work = Path(tempfile.mkdtemp(prefix="kjs", dir="/tmp"))   # short: a socket path has ~100 bytes
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(repo), os.environ.get("PYTHONPATH")))),
           "KREFINE_JUDGE_DIR": str(work / "s"), "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1"}
    env.pop("KREFINE_KEEP_JUDGE_S", None)
    config = work / "stress.toml"
    config.write_text(config_text(a.device))
    names = list(PROBLEMS)[:a.problems]
    cases = {k: v for k, v in write_cases(work / "cases").items() if k[0] in names and k[1] in kinds}
    keep_s = 900.0
    run = lambda key: one_eval(repo, env, a.device, config, keep_s, *cases[key])  # noqa: E731
    t0 = time.monotonic()
    try:
        # 1) alone: one client, one eval at a time, against the same service
        print(f"judge_stress: {len(cases)} cases alone on {a.device} ({repo})", flush=True)
        alone: dict[tuple, dict] = {}
        for i, key in enumerate(sorted(cases)):
            alone[key] = run(key)
            r = alone[key]
            print(f"  alone {i + 1}/{len(cases)} {key[0]}/{key[1]}: exit {r['rc']} {r.get('verdict', r.get('error'))} "
                  f"{r.get('flags', '')} {r['wall_s']:.1f} s", flush=True)
        alone_s = time.monotonic() - t0

        # 2) under load: the cases mixed, each client one eval at a time
        rng = random.Random(a.seed)
        order = [k for _ in range(a.verdicts // len(cases) + 1) for k in sorted(cases)]
        rng.shuffle(order)
        todo: queue.Queue = queue.Queue()
        for key in order[:a.verdicts]:
            todo.put(key)
        loaded: list[dict] = []
        lock = threading.Lock()

        def client(c: int) -> None:
            while True:
                try:
                    key = todo.get_nowait()
                except queue.Empty:
                    return
                r = {"problem": key[0], "kind": key[1], "client": c, **run(key)}
                r["same_as_alone"] = signature(r) == signature(alone[key]) and r["rc"] != 3
                with lock:
                    loaded.append(r)
                    n = len(loaded)
                print(f"  load {n}/{a.verdicts} c{c} {key[0]}/{key[1]}: exit {r['rc']} "
                      f"{r.get('verdict', r.get('error'))} {r['wall_s']:.1f} s"
                      + ("" if r["same_as_alone"] else f"  DIFFERS from alone: {signature(alone[key])}"), flush=True)
        t1 = time.monotonic()
        threads = [threading.Thread(target=client, args=(c,)) for c in range(a.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        load_s = time.monotonic() - t1
        services = service_stats(repo, env)
    finally:
        subprocess.run([sys.executable, "-m", "agent.cli", "judge", "stop"], cwd=repo, env=env,
                       capture_output=True, timeout=120)
        shutil.rmtree(work, ignore_errors=True)

    differs = [r for r in loaded if not r["same_as_alone"]]
    judged = lambda rows: [r for r in rows if r.get("service_pid")]  # noqa: E731 - reached the service
    summary = {
        "device": a.device, "clients": a.clients, "verdicts": len(loaded), "cases": len(cases),
        "problems": names, "kinds": kinds, "repo": str(repo),
        "differ_from_alone": len(differs), "exit_3": sum(r["rc"] == 3 for r in loaded),
        "alone_exit_3": sum(r["rc"] == 3 for r in alone.values()),
        "wall_alone": walls(judged(list(alone.values()))), "wall_under_load": walls(judged(loaded)),
        "alone_s": round(alone_s, 1), "load_s": round(load_s, 1),
        "load_verdicts_per_s": round(len(loaded) / load_s, 3) if load_s else None,
        "service_pids": sorted({r["service_pid"] for r in loaded if r.get("service_pid")}),
        "services_at_end": services,
    }
    print(json.dumps(summary, indent=1), flush=True)
    for r in differs:
        print(f"DIFFERS: {r['problem']}/{r['kind']} under load: {signature(r)} {r.get('error', '')}; "
              f"alone: {signature(alone[(r['problem'], r['kind'])])}", flush=True)
    if a.out is not None:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps({"summary": summary, "alone": [{"problem": k[0], "kind": k[1], **v}
                                                                   for k, v in sorted(alone.items())],
                                     "under_load": loaded}, indent=1))
    bad = differs or summary["alone_exit_3"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
