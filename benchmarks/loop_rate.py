"""Rounds per minute of `krefine run` with replayed completions, this checkout beside an
older one (issue 9, "Loop: rounds per minute ... before/after"), measured in one run.

Each code root runs the same command in a fresh process, its own run directory:

  krefine run PROBLEM --model replay:REPLAY --candidates N --device DEVICE --out DIR

(as `python -m agent.cli` with PYTHONPATH and cwd set to the root, so an older checkout
runs its own agent/ and tools/). Reported per root and repeat: exit status, wall
seconds, rounds and candidates from summary.json, rounds per minute, the stop reason,
the per-round split of benchmarks/round_split.py, and the judge wall per candidate (each
verdict's duration_s: from the judgement's start to its verdict, every step included),
with the after/before ratio of their means when --before is given.

  python3 benchmarks/loop_rate.py --out $OUT/loop.json [--before .before] [--repeat 2]
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

ROOT = Path(__file__).resolve().parent.parent


def one_run(code_root: Path, problem: Path, replay: Path, candidates: int, device: str) -> dict:
    """One `krefine run` under `code_root`'s code; figures from its run directory."""
    with tempfile.TemporaryDirectory(prefix="krefine-loop-") as d:
        out = Path(d) / "run"
        cmd = [sys.executable, "-m", "agent.cli", "run", str(problem), "--model", f"replay:{replay}",
               "--candidates", str(candidates), "--device", device, "--out", str(out)]
        # the root's own agent/ and tools/ first; the rest of the path (installed wheels) after it
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, (str(code_root), os.environ.get("PYTHONPATH")))))
        t = time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=code_root, env=env, timeout=900)
        wall = time.perf_counter() - t
        row = {"root": str(code_root), "rc": p.returncode, "wall_s": round(wall, 2)}
        summary = out / "summary.json"
        if not summary.exists():
            return {**row, "error": (p.stderr or p.stdout)[-500:]}
        s = json.loads(summary.read_text())
        rounds = s.get("rounds") or 0
        split = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "round_split.py"), str(out)],
                               capture_output=True, text=True, cwd=ROOT,
                               env=dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))))
        walls = {f.stem: json.loads(f.read_text()).get("duration_s") for f in sorted((out / "evals").glob("*.json"))}
        return {**row, "rounds": rounds, "candidates": s.get("candidates_evaluated"), "judge_wall_s": walls,
                "stop_reason": s.get("stop_reason"), "best": s.get("best"),
                "rounds_per_min": round(60.0 * rounds / wall, 2) if wall > 0 else None,
                "round_split": split.stdout}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--before", type=Path, default=None, help="an older checkout (agent/, tools/, prompts/, ...)")
    ap.add_argument("--problem", type=Path, default=ROOT / "examples" / "relu.py")
    ap.add_argument("--replay", type=Path, default=ROOT / "examples" / "relu.replay.jsonl")
    ap.add_argument("--candidates", type=int, default=1)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    roots = [("after", ROOT)] + ([("before", args.before.resolve())] if args.before else [])
    results: dict = {"date": time.strftime("%Y-%m-%d"), "problem": str(args.problem),
                     "replay": str(args.replay), "runs": []}
    for i in range(args.repeat):
        for label, root in roots:   # alternate, so drift over the call hits both alike
            row = {"label": label, "repeat": i, **one_run(root, args.problem.resolve(), args.replay.resolve(),
                                                          args.candidates, args.device)}
            print(json.dumps({k: v for k, v in row.items() if k != "round_split"}), flush=True)
            print(row.get("round_split", ""), flush=True)
            results["runs"].append(row)
            args.out.write_text(json.dumps(results, indent=1))
    print("| code | repeat | exit | rounds | candidates | wall s | rounds/min | judge wall per candidate s | stop |")
    print("|---|---|---|---|---|---|---|---|---|")
    means: dict[str, list[float]] = {}
    for r in results["runs"]:
        walls = [w for w in (r.get("judge_wall_s") or {}).values() if w is not None]
        mean = sum(walls) / len(walls) if walls else None
        if mean is not None:
            means.setdefault(r["label"], []).append(mean)
        print(f"| {r['label']} | {r['repeat']} | {r['rc']} | {r.get('rounds', '-')} | {r.get('candidates', '-')} | "
              f"{r['wall_s']} | {r.get('rounds_per_min', '-')} | {'-' if mean is None else f'{mean:.3f}'} | "
              f"{r.get('stop_reason', r.get('error', '-'))} |")
    if means.get("after") and means.get("before"):
        after, before = (sum(means[k]) / len(means[k]) for k in ("after", "before"))
        results["judge_wall_ratio"] = round(after / before, 4)
        args.out.write_text(json.dumps(results, indent=1))
        print(f"judge wall per candidate, after / before: {after:.3f} s / {before:.3f} s = {after / before:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
