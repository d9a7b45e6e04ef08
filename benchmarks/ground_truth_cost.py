"""What the GPU ground truth (CUPTI records, tools/sandbox/activity.py) costs, on a GPU.

Two parts, each written to the JSON file --out names:

  cupti  in a fresh process, as a worker: the probe (CUDA init, the first Kineto session,
         a warm one), the cost of one recorded call, and the host cost of a launch
         before and after CUPTI was set up (does recording leave launches slower?);
  evals  warm evaluations in two judge sessions of one problem, the ground truth on in
         one and off in the other ([guards] gpu_ground_truth), judged alternately after
         one warm-up each: wall per candidate, phases, the speedup, what was recorded.

  python3 benchmarks/ground_truth_cost.py --out $OUT/gt_cost.json --evals 5
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))   # this checkout's tools/, for the judge and its workers

CUPTI = r'''
import json, time, torch, triton, triton.language as tl
from types import SimpleNamespace
from tools.sandbox.activity import Recorder, probe

@triton.jit
def bump(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) + 1.0)

def launch_us(n=2000):
    x = torch.zeros(16, device="cuda")
    bump[(1,)](x, BLOCK=16)
    out = {}
    for label, fn in (("torch", lambda: x.add_(1.0)), ("triton", lambda: bump[(1,)](x, BLOCK=16))):
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(n):
            fn()
        torch.cuda.synchronize()
        out[label] = round((time.perf_counter() - t) / n * 1e6, 2)
    return out

torch.zeros(1, device="cuda")
launch_us()
before = [launch_us() for _ in range(3)]
p = probe()
rec = Recorder(SimpleNamespace(launches={}), True)
x = torch.zeros(1 << 20, device="cuda")
sessions = []
for _ in range(20):
    t = time.perf_counter()
    with rec.record():
        x.add_(1.0)
    sessions.append(time.perf_counter() - t)
after = [launch_us() for _ in range(3)]
a = torch.randn(64, 100, device="cuda")
names = {}
for label, fn in (("zeros", lambda: torch.zeros(1000, device="cuda")), ("t_contiguous", lambda: a.t().contiguous()),
                  ("to_half", lambda: a.half()), ("cat", lambda: torch.cat([a, a])), ("arange", lambda: torch.arange(9, device="cuda")),
                  ("mm", lambda: a @ a.t()), ("mul_gt", lambda: a * (a > 0)), ("sum", lambda: a.sum()),
                  ("cpu_roundtrip", lambda: a.cpu().cuda()), ("item", lambda: a[0, 0].item())):
    fn()
    r = Recorder(SimpleNamespace(launches={}), True)
    with r.record():
        fn()
    names[label] = r.facts()
print("RESULT", json.dumps({"probe": p, "recorded_call_s": sorted(sessions),
                           "launch_us_before": before, "launch_us_after": after,
                           "facts": rec.facts(), "names": names}))
'''


def cupti_part(env_extra: dict) -> dict:
    import os
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:   # triton.jit reads its source
        f.write(CUPTI)
    try:
        out = subprocess.run([sys.executable, f.name], cwd=ROOT, capture_output=True, text=True, timeout=300,
                             env={**os.environ, "PYTHONPATH": str(ROOT), **env_extra})
    finally:
        os.unlink(f.name)
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    return {"error": out.stderr[-2000:]}


def evals_part(problem_path: Path, candidate_path: Path, n: int) -> dict:
    from tools.judge import Judge
    from tools.problem import load_problem
    from tools.settings import EvalSettings, GuardSettings
    problem, src = load_problem(problem_path), candidate_path.read_text()
    judges = {on: Judge(problem, device="cuda", settings=EvalSettings(
        guards=dataclasses.replace(GuardSettings(), gpu_ground_truth=on))) for on in (True, False)}
    rows = {True: [], False: []}
    try:
        for on in (True, False):
            judges[on].judge(src, candidate_name="candidate.py", profile=False)   # the session's one-time costs
        for i in range(n):
            for on in ((True, False) if i % 2 == 0 else (False, True)):
                t = time.perf_counter()
                v = judges[on].judge(src, candidate_name="candidate.py", profile=False)
                wall = time.perf_counter() - t
                rows[on].append({"wall_s": round(wall, 4), "status": v.status.value,
                                 "phase_s": v.checks.get("phase_s"), "speedup_eager": v.speedup_eager,
                                 "candidate_ms": v.timing["candidate"].median_ms if v.timing.get("candidate") else None,
                                 "per_call_ms": v.checks.get("timing_per_call_ms"),
                                 "measure": v.checks.get("timing_measure"), "host_check": v.checks.get("host_check"),
                                 "gpu_activity": v.checks.get("gpu_activity"),
                                 "diagnostics": [f"{d.kind}: {d.message[:200]}" for d in v.diagnostics]})
    finally:
        for j in judges.values():
            j.close()
    med = {on: statistics.median(r["wall_s"] for r in rows[on]) for on in rows}
    return {"problem": str(problem_path), "candidate": str(candidate_path), "median_wall_s_on": med[True],
            "median_wall_s_off": med[False], "ratio": med[True] / med[False], "on": rows[True], "off": rows[False]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--evals", type=int, default=5)
    ap.add_argument("--problem", default=str(ROOT / "tests/exploits/problems/relu.py"))
    ap.add_argument("--candidate", default=str(ROOT / "tests/exploits/ok_relu.py"))
    args = ap.parse_args()
    # does a worker launch more slowly once CUPTI was set up, and does Kineto's teardown matter?
    result = {"cupti": cupti_part({})}
    for teardown in ("0", "1"):
        r = cupti_part({"TEARDOWN_CUPTI": teardown})
        result[f"cupti_teardown_{teardown}"] = {k: r.get(k) for k in ("probe", "launch_us_before", "launch_us_after",
                                                                      "recorded_call_s", "error")}
    for k, r in result.items():
        print(k, {x: r.get(x) for x in ("probe", "launch_us_before", "launch_us_after", "error")}, flush=True)
    result["evals"] = evals_part(Path(args.problem), Path(args.candidate), args.evals)
    ev = result["evals"]
    for on in ("on", "off"):
        for r in ev[on]:
            print(on, r["wall_s"], r["status"], r["phase_s"], r["measure"], r["per_call_ms"],
                  (r["host_check"] or {}).get("candidate_ms_per_call"), r["diagnostics"][:1], flush=True)
    print(f"warm eval median: on {ev['median_wall_s_on']:.3f} s, off {ev['median_wall_s_off']:.3f} s, "
          f"ratio {ev['ratio']:.3f}", flush=True)
    Path(args.out).write_text(json.dumps(result, indent=1, default=str))


if __name__ == "__main__":
    main()
