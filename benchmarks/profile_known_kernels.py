"""Profile kernels of known character on the GPU: classes, roofline fractions, overhead.

For every case in tests/fixtures/profiler/known_kernels.py: time it (tools/perf/timer.py),
profile one forward in-process (torch.profiler breakdown + Triton resources), cost the
reference, summarize without ncu; then run it again under Nsight Compute in a child
process (the way the sandbox wraps a worker) and summarize with the counters. Records
raw outputs (Kineto traces, ncu CSVs) for the CPU tests' fixtures, and the wall time
the profile step adds per candidate with and without ncu.

    python benchmarks/profile_known_kernels.py --out DIR [--cases copy,tiny] [--no-ncu]
    python benchmarks/profile_known_kernels.py --child CASE [--nvtx NAME]   (ncu's target)
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "fixtures" / "profiler"))


def child(case_name: str, nvtx_name: str, profile_step: bool = False) -> None:
    """One forward inside an NVTX push/pop range, after a warm-up outside it; with
    profile_step, first time the in-process profile step as a fresh worker pays it."""
    import torch
    from known_kernels import CASES
    case = CASES[case_name]
    inputs = case.make_inputs("cuda")
    case.forward(*inputs)
    torch.cuda.synchronize()
    if profile_step:
        from tools.perf import profiler
        took = []
        for _ in range(2):   # the first pays CUPTI / Kineto start-up, the second does not
            t = time.perf_counter()
            profiler.profile_forward(case.forward, inputs, triton_names=case.triton_names,
                                     jit_functions=case.jit_functions)
            took.append(time.perf_counter() - t)
        print(json.dumps({"profile_first_s": took[0], "profile_second_s": took[1]}))
    torch.cuda.nvtx.range_push(nvtx_name)
    case.forward(*inputs)
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()


def run_ncu(case: str, out: Path) -> dict:
    """The case's child under `ncu_command`, as the sandbox wraps a worker; one retry in
    the plainest form so a flag this ncu refuses still leaves a record."""
    from tools.perf.ncu import ncu_command
    log = out / f"ncu_{case}.csv"
    cmd = ncu_command([sys.executable, str(Path(__file__).resolve()), "--child", case],
                      log_file=str(log))
    res = _ncu_once(cmd, log)
    if res["rc"] != 0 or not res["rows"]:
        plain = [c for c in cmd if c not in ("--print-units", "base")]
        i = plain.index("--metrics")
        retry = _ncu_once(plain[:i] + plain[i + 2:], log.with_name(log.stem + "_plain.csv"))
        res = {**retry, "first_try": {k: v for k, v in res.items() if k != "rows"}}
    return res


def _ncu_once(cmd: list[str], log: Path) -> dict:
    from tools.perf.ncu import parse_ncu_csv
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    wall = time.perf_counter() - t
    text = log.read_text() if log.exists() else ""
    rows = parse_ncu_csv(text)
    if not rows and '"Kernel Name"' in p.stdout:   # --log-file ignored: the report went to stdout
        rows = parse_ncu_csv(p.stdout)
    return {"cmd": cmd, "rc": p.returncode, "wall_s": wall, "rows": rows, "log_bytes": len(text),
            "stdout_tail": p.stdout[-1500:], "stderr_tail": p.stderr[-1500:]}


def plain_child(case: str, profile_step: bool) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", case]
    t = time.perf_counter()
    p = subprocess.run(cmd + (["--profile-step"] if profile_step else []), check=True,
                       capture_output=True, text=True, timeout=240)
    out = {"wall_s": time.perf_counter() - t}
    for line in p.stdout.splitlines():
        if line.startswith("{"):
            out.update(json.loads(line))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="profile_out")
    ap.add_argument("--cases", default="")
    ap.add_argument("--no-ncu", action="store_true")
    ap.add_argument("--child")
    ap.add_argument("--nvtx", default="krefine.candidate")
    ap.add_argument("--profile-step", action="store_true")
    a = ap.parse_args()
    if a.child:
        return child(a.child, a.nvtx, a.profile_step)

    import torch
    import triton
    from known_kernels import CASES
    from tools.perf import profiler, roofline as rl, summary
    from tools.perf.ncu import find_ncu
    from tools.perf.profiles import device_properties, gpu_profile, measure_ceilings, profile_for
    from tools.perf.timer import time_cuda, time_host

    out = Path(a.out)
    (out / "raw").mkdir(parents=True, exist_ok=True)
    names = [c for c in a.cases.split(",") if c] or list(CASES)
    dev = torch.cuda.get_device_name(0)
    profile = gpu_profile(0, cache_path=out / "ceilings.json")
    ncu = None if a.no_ncu else find_ncu()
    env = {"gpu": dev, "torch": torch.__version__, "triton": triton.__version__,
           "profile": profile.name, "known_profile": profile_for(dev) is not None, "ncu": ncu,
           "date": time.strftime("%Y-%m-%d"), "props": device_properties(0)}
    import importlib.util   # tools/perf/timer.py's nvtx_range needs the `nvtx` package
    env["nvtx_package"] = importlib.util.find_spec("nvtx") is not None
    if ncu:
        env["ncu_version"] = subprocess.run([ncu, "--version"], capture_output=True, text=True).stdout.strip()[-120:]
    print(json.dumps(env), flush=True)
    results = {"env": env, "cases": {}}

    for name in names:
        case = CASES[name]
        r: dict = {}
        try:
            # 1) time like the evaluator does
            inputs = case.make_inputs("cuda")
            ref = case.reference().cuda()
            with torch.no_grad():
                err = (case.forward(*inputs).float() - ref(*inputs).float()).abs().max().item()
            r["max_abs_err"] = err
            fwd = lambda: case.forward(*inputs)  # noqa: E731
            times = time_cuda(fwd, warmup=5, iters=20)
            r["time_ms"] = sorted(times)[len(times) // 2]
            r["host_ms"] = time_host(fwd, iters=20)
            # 2) the in-process profile step, timed; and the raw trace for fixtures
            t = time.perf_counter()
            fw = profiler.profile_forward(case.forward, inputs, triton_names=case.triton_names,
                                          jit_functions=case.jit_functions)
            r["profile_step_s"] = time.perf_counter() - t
            r["forward"] = fw
            from torch.profiler import ProfilerActivity, profile as tprof
            with tprof(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(3):
                    case.forward(*inputs)
                torch.cuda.synchronize()
            prof.export_chrome_trace(str(out / "raw" / f"trace_{name}.json"))
            # 3) ptxas on the PTX (the CPU path) against the driver's figures
            r["ptxas"] = []
            for jf in case.jit_functions:
                for cache in jf.device_caches.values():
                    kd = next(c for c in cache if isinstance(c, dict))
                    for k in kd.values():
                        pr = profiler.ptxas_resources(k.asm["ptx"])
                        r["ptxas"].append({"name": k.name, "driver_n_regs": k.n_regs,
                                           "driver_n_spills": k.n_spills, **pr})
            # 4) cost and summary without ncu
            cost = rl.problem_cost(ref, inputs)
            r["cost"] = cost
            b = summary.summarize(profile=profile, cost=cost, time_ms=r["time_ms"], forward=fw,
                                  host_ms=r["host_ms"])
            r["bottleneck"] = b
            # 5) under ncu, as the sandbox would wrap the worker
            if ncu:
                n = run_ncu(name, out / "raw")
                r["ncu_run"] = {k: v for k, v in n.items() if k != "rows"}
                r["ncu_rows"] = n["rows"]
                r["bottleneck_ncu"] = summary.summarize(profile=profile, cost=cost, time_ms=r["time_ms"],
                                                        forward=fw, ncu_rows=n["rows"], host_ms=r["host_ms"])
        except Exception as e:  # record and go on: one broken case must not cost the run
            import traceback
            r["error"] = traceback.format_exc()[-3000:]
            print(f"{name}: {type(e).__name__}: {e}", flush=True)
        results["cases"][name] = r
        b, bn = r.get("bottleneck") or {}, r.get("bottleneck_ncu") or {}
        n = bn.get("ncu") or {}
        print(f"{name:12s} {r.get('time_ms', 0):8.4f} ms  kernels {b.get('gpu_busy_us') or 0:8.1f} us  "
              f"{b.get('class')}/{bn.get('class')} (expect {case.expect})  roofline "
              f"{b.get('roofline_fraction') or 0:.3f} kernels {b.get('kernel_roofline_fraction') or 0:.3f}  "
              f"ncu dram {n.get('dram_pct') or 0:.0f}% sm {n.get('sm_pct') or 0:.0f}%  "
              f"ncu_retry={'first_try' in r.get('ncu_run', {})}", flush=True)

    # 6) per-candidate overhead: a fresh process (as each candidate's worker is), plain,
    #    with the in-process profile step, and the ncu pass's wall time beside it
    results["overhead"] = {}
    for c in ("tiny", "copy", "matmul_bf16"):
        if c in names:
            results["overhead"][c] = {"plain": plain_child(c, False),
                                      "profile_step": plain_child(c, True),
                                      "ncu_wall_s": results["cases"][c].get("ncu_run", {}).get("wall_s")}
    results["measured_ceilings"] = measure_ceilings(0)
    (out / "results.json").write_text(json.dumps(results, indent=1, default=str))
    with tarfile.open(out / "raw.tar.gz", "w:gz") as tf:
        tf.add(out / "raw", arcname="raw")
    print(json.dumps(results["measured_ceilings"]))
    print(json.dumps(results.get("overhead")))


if __name__ == "__main__":
    main()
