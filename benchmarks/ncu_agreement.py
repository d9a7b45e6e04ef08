"""Does `krefine eval`'s bottleneck summary agree with Nsight Compute? (issue 4, GPU)

For each (problem, candidate) pair: one `tools.judge.evaluate(..., profile=True)` (the
verdict's ncu pass, torch.profiler breakdown and summary), then an independent ncu run of
the same candidate: our own small runner script, our own ncu command line and a plain
csv parse (not tools/perf/ncu.py's ncu_command or parse_ncu_csv). Prints both sets of
figures and their ratios; writes everything to --out as JSON.

  python benchmarks/ncu_agreement.py --kb .kb --out $OUT/ncu_agreement.json \
      [--pairs 19_ReLU.py:kb_19_relu.py,examples/relu.py:benchmarks/throughput/gate_correct.py]

Also compares the verdict's timed figure (timing_ms.candidate.median, in the measure the
verdict names) with the independent ncu kernel time (issue 9, P2: within 5% for
single-kernel candidates of 20 us or more).
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

METRICS = ("gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum",
           "dram__throughput.avg.pct_of_peak_sustained_elapsed")

RUNNER = '''
import importlib.util, sys, torch
sys.path.insert(0, {root!r})
from tools.problem import load_problem, build_model, make_inputs
problem = load_problem({problem!r})
spec = importlib.util.spec_from_file_location("cand", {candidate!r})
cand = importlib.util.module_from_spec(spec); spec.loader.exec_module(cand)
model = build_model(cand.ModelNew, problem.module, 42, "cuda:0")
x = make_inputs(problem.module, 0, "cuda:0")
with torch.no_grad():
    model(*x); torch.cuda.synchronize()
    torch.cuda.nvtx.range_push("agree")
    model(*x); torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
'''


def independent_ncu(problem: Path, candidate: Path, ncu: str) -> dict:
    with tempfile.TemporaryDirectory() as d:
        script = Path(d) / "runner.py"
        script.write_text(RUNNER.format(root=str(ROOT), problem=str(problem), candidate=str(candidate)))
        cmd = [ncu, "--clock-control", "none", "--nvtx", "--nvtx-include", "agree/",
               "--metrics", ",".join(METRICS), "--csv", "--page", "raw", "--print-units", "base",
               sys.executable, str(script)]
        t = time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=500)
        wall = time.perf_counter() - t
    text = p.stdout[p.stdout.find('"ID"'):] if '"ID"' in p.stdout else ""
    rows = list(csv.DictReader(io.StringIO(text)))
    rows = [r for r in rows if r.get("ID", "").isdigit()]  # drop the units row, if any

    def num(text):  # ncu writes thousands separators even in base units: "3,156,832"
        return float(text.replace(",", ""))

    def total(metric):
        vals = [num(r[metric]) for r in rows if r.get(metric, "").strip()]
        return sum(vals) if vals else None
    dur_ns = total("gpu__time_duration.sum")
    pct = [(num(r["gpu__time_duration.sum"]), num(r[METRICS[3]])) for r in rows
           if r.get(METRICS[3], "").strip() and r.get("gpu__time_duration.sum", "").strip()]
    read, write = total("dram__bytes_read.sum"), total("dram__bytes_write.sum")
    return {"rc": p.returncode, "wall_s": round(wall, 2), "kernels": len(rows),
            "names": sorted({r.get("Kernel Name", "?")[:60] for r in rows}),
            "duration_us": dur_ns / 1e3 if dur_ns else None,
            "dram_bytes": (read or 0) + (write or 0) if read is not None else None,
            "dram_pct": (sum(d * q for d, q in pct) / sum(d for d, _ in pct)) if pct else None,
            "stderr_tail": p.stderr[-400:] if p.returncode else ""}


def ours(problem: Path, candidate: Path) -> dict:
    from tools.judge import evaluate
    from tools.problem import load_problem
    t = time.perf_counter()
    v = evaluate(load_problem(problem), candidate.read_text(), device="cuda", profile=True)
    b = v.bottleneck or {}
    return {"wall_s": round(time.perf_counter() - t, 2), "verdict": v.status.value,
            "ncu_check": v.checks.get("ncu"), "ncu_error": v.checks.get("ncu_error"),
            "phase_s": v.checks.get("phase_s"), "output_transfer": v.checks.get("output_transfer"),
            "summary": b.get("summary"), "class": b.get("class"),
            "roofline_fraction": b.get("roofline_fraction"),
            "kernel_roofline_fraction": b.get("kernel_roofline_fraction"),
            "time_ms": b.get("time_ms"), "gpu_busy_us": b.get("gpu_busy_us"),
            "ncu": b.get("ncu"), "sources": b.get("sources"),
            "kernels": b.get("kernels"), "speedup_eager": v.speedup_eager,
            "timed_ms": v.timing["candidate"].median_ms if v.timing.get("candidate") else None,
            "measure": v.checks.get("timing_measure"),
            "per_call_ms": (v.checks.get("timing_per_call_ms") or {}).get("candidate")}


def _ratio(a, b):
    return round(a / b, 3) if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b else None


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kb", type=Path, required=True, help="KernelBench checkout (has KernelBench/level1)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--pairs", default="19_ReLU.py:kb_19_relu.py,1_Square_matrix_multiplication_.py:kb_1_matmul.py",
                    help="comma-separated PROBLEM:CANDIDATE (level1 file : benchmarks/candidates file)")
    args = ap.parse_args()
    from tools.perf.gpuinfo import gpu_state
    from tools.perf.ncu import find_ncu
    ncu = find_ncu()
    if ncu is None:
        print("ncu not found", file=sys.stderr)
        return 2
    results = {"gpu": gpu_state(0), "date": time.strftime("%Y-%m-%d"), "ncu": ncu, "pairs": []}
    for pair in args.pairs.split(","):
        prob, cand = pair.split(":")
        # a path with a "/" is relative to the checkout; a bare name is a KernelBench level-1
        # problem and a benchmarks/candidates file
        problem = ROOT / prob if "/" in prob else args.kb / "KernelBench" / "level1" / prob
        candidate = ROOT / cand if "/" in cand else ROOT / "benchmarks" / "candidates" / cand
        row = {"problem": prob, "candidate": cand, "ours": ours(problem, candidate)}
        print(json.dumps(row["ours"]), flush=True)
        row["independent"] = independent_ncu(problem, candidate, ncu)
        print(json.dumps(row["independent"]), flush=True)
        o, i = row["ours"], row["independent"]
        on = o.get("ncu") or {}
        row["agreement"] = {
            "ncu_duration_ours_over_independent": _ratio(on.get("duration_us"), i["duration_us"]),
            "profiler_busy_over_independent_ncu": _ratio(o.get("gpu_busy_us"), i["duration_us"]),
            "dram_bytes_ours_over_independent": _ratio(on.get("dram_bytes"), i["dram_bytes"]),
            # the verdict's timed figure (its measure) against ncu's kernel time
            "timed_over_independent_ncu": _ratio(o["timed_ms"] * 1e3 if o.get("timed_ms") else None,
                                                 i["duration_us"]),
            "dram_pct_ours_minus_independent": (round(on["dram_pct"] - i["dram_pct"], 1)
                                                if on.get("dram_pct") is not None and i["dram_pct"] is not None
                                                else None)}
        print(json.dumps(row["agreement"]), flush=True)
        results["pairs"].append(row)
        args.out.write_text(json.dumps(results, indent=2))
    print("\n| problem | ncu in verdict | class | verdict ncu µs | independent ncu µs | profiler µs "
          "| DRAM % verdict / indep. | DRAM bytes verdict / indep. | timed µs (measure) | timed / ncu |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results["pairs"]:
        o, i = r["ours"], r["independent"]
        on = o.get("ncu") or {}
        print(f"| {r['problem']} | {o['ncu_check']} | {o['class']} | {_f(on.get('duration_us'))} | "
              f"{_f(i['duration_us'])} | {_f(o.get('gpu_busy_us'))} | {_f(on.get('dram_pct'))} / "
              f"{_f(i['dram_pct'])} | {_f(on.get('dram_bytes'))} / {_f(i['dram_bytes'])} | "
              f"{_f(o['timed_ms'] * 1e3 if o.get('timed_ms') else None)} ({o.get('measure')}) | "
              f"{_f(r['agreement']['timed_over_independent_ncu'])} |")
        print(f"  summary: {o['summary']}")
    return 0


def _f(x):
    return f"{x:.4g}" if isinstance(x, (int, float)) else "-"


if __name__ == "__main__":
    sys.exit(main())
