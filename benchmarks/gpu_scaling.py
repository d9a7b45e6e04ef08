"""`krefine bench` on 1 GPU, on 2 GPUs, and through a local Ray instance with one judge
actor per GPU, over the same problems; the scaling and whether the verdicts agree.

    python3 benchmarks/gpu_scaling.py LEVEL_DIR --filter REGEX --seed-cache DIR --out OUT \\
        [--stages g1,g2,ray] [--set search.sweep_variants=1 ...]

Fill the seed cache first (`krefine bench LEVEL_DIR --seeds-only --set search.seed_kernel=inductor
--set search.seed_cache=DIR --filter REGEX`), or the first stage's wall holds the compiles.
Each stage is one `krefine bench --model none` (the Inductor seed and the sweep) into its
own directory under --bench-dir (default /tmp/kbscale), timed from start to results; a
stage whose directory already has results is read, not run again (so the stages can be
split over several runs, on one machine or on another after untarring the bench dir). During every
stage `nvidia-smi --query-compute-apps` is sampled each 2 s: which process held memory on
which GPU. OUT/scaling.json gets, per stage: wall, candidates judged (the seed and each
sweep variant), candidates per minute, the verdict table (problem -> seed verdict, best
verdict; speedups differ run to run and are not compared); then the ratio of the 2-GPU
and Ray stages' rates to the 1-GPU one, whether their tables equal the 1-GPU table, and
the processes that held memory on more than one GPU (there must be none).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent.bench.stats import problem_result  # noqa: E402
from agent.loop.runstats import load_run  # noqa: E402

STAGES = {"g1": ["--gpus", "1"], "g2": ["--gpus", "2"], "ray": ["--ray", "local", "--set", "bench.judges=2"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("level")
    ap.add_argument("--filter", required=True)
    ap.add_argument("--seed-cache", required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--bench-dir", type=Path, default=Path("/tmp/kbscale"))
    ap.add_argument("--stages", default="g1,g2,ray")
    ap.add_argument("--set", action="append", default=[], dest="sets")
    ap.add_argument("--device", default="cuda", help="cpu: a smoke test of this script (stage g1 only)")
    ap.add_argument("--timeout-s", type=float, default=560.0, help="for all stages of this call together")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    report_path = args.out / "scaling.json"
    report = json.loads(report_path.read_text()) if report_path.exists() else {"stages": {}}
    deadline = time.monotonic() + args.timeout_s
    for stage in args.stages.split(","):
        bench = args.bench_dir / stage
        if stage not in report["stages"]:
            left = deadline - time.monotonic()
            if left < 30:
                print(f"{stage}: not run (the call's time is out)", flush=True)
                continue
            report["stages"][stage] = run_stage(stage, bench, args, left)
            report_path.write_text(json.dumps(report, indent=1))
        s = report["stages"][stage]
        print(f"{stage}: {s['candidates']} candidates in {s['wall_s']:.0f} s = {s['per_min']:.1f}/min, "
              f"{len(s['table'])} problems, exit {s['exit']}", flush=True)
    base = report["stages"].get("g1")
    for stage in ("g2", "ray"):
        s = report["stages"].get(stage)
        if base and s and base["per_min"]:
            report[f"{stage}_over_g1"] = round(s["per_min"] / base["per_min"], 3)
            report[f"{stage}_table_equal"] = s["table"] == base["table"]
            print(f"{stage} / g1: {report[f'{stage}_over_g1']:.2f}x, same verdicts: {report[f'{stage}_table_equal']}")
    report["processes_on_more_than_one_gpu"] = sorted({p for s in report["stages"].values()
                                                       for p in s.get("multi_gpu_pids", [])})
    report_path.write_text(json.dumps(report, indent=1))
    return 0


def run_stage(stage: str, bench: Path, args, limit_s: float) -> dict:
    cmd = [sys.executable, "-m", "agent.cli", "bench", args.level, "--filter", args.filter, "--model", "none",
           "--device", args.device, "--out", str(bench), "--config", str(ROOT / "benchmarks" / "kb_memory.toml"),
           "--set", "search.seed_kernel=inductor", "--set", f"search.seed_cache={args.seed_cache}",
           *[x for kv in args.sets for x in ("--set", kv)], *(STAGES[stage] if args.device == "cuda" else [])]
    print(f"== {stage}: {' '.join(cmd[2:])}", flush=True)
    samples: list[tuple[float, str, str, str]] = []
    stop = threading.Event()
    watcher = threading.Thread(target=_watch, args=(samples, stop), daemon=True)
    watcher.start()
    t0 = time.monotonic()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, timeout=limit_s, capture_output=True, text=True)
        code = proc.returncode
        tail = proc.stdout.splitlines()[-6:] + proc.stderr.splitlines()[-4:]
    except subprocess.TimeoutExpired:
        code, tail = "timeout", []
    wall = time.monotonic() - t0
    stop.set()
    watcher.join()
    print("\n".join(tail), flush=True)
    table, judged = verdicts(bench)
    gpus_of: dict[str, set] = {}
    for _, pid, uuid, _mem in samples:
        gpus_of.setdefault(pid, set()).add(uuid)
    return {"wall_s": round(wall, 1), "exit": code, "candidates": judged,
            "per_min": round(judged / wall * 60, 2) if wall else 0.0, "table": table,
            "processes": len(gpus_of), "gpus_seen": sorted({u for _, _, u, _ in samples}),
            "multi_gpu_pids": sorted(p for p, u in gpus_of.items() if len(u) > 1)}


def verdicts(bench: Path) -> tuple[dict, int]:
    """problem -> [seed verdict, best verdict], and the candidates judged, over the runs."""
    table, judged = {}, 0
    for run_dir in sorted(p.parent for p in bench.rglob("run.json")):
        r = problem_result(load_run(run_dir), run_dir.name)
        table[run_dir.name] = [r.seed, r.best_verdict]
        judged += len(r.judge_s)
    return table, judged


def _watch(samples: list, stop: threading.Event) -> None:
    while not stop.wait(2.0):
        try:
            out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,gpu_uuid,used_memory",
                                  "--format=csv,noheader"], capture_output=True, text=True, timeout=10).stdout
        except (OSError, subprocess.TimeoutExpired):
            continue
        for line in out.splitlines():
            parts = [x.strip() for x in line.split(",")]
            if len(parts) >= 3:
                samples.append((time.time(), parts[0], parts[1], parts[2]))


if __name__ == "__main__":
    sys.exit(main())
