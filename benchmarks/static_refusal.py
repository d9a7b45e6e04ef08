"""The wall of `krefine eval` on a candidate the static guards refuse, beside `import torch`.

A refused candidate needs no torch (issue 31): its verdict should cost a fraction of one
`python -c "import torch"` on the same machine (aim: < 0.5x). Each repetition runs, in
fresh processes and in turn, `python -c "import torch"` and `krefine eval PROBLEM
CANDIDATE` with the judge service's default host and with `--keep-judge 0` (judged in the
eval's own process); the medians and their ratios are printed. Every eval must print
the candidate's rejection and exit 1, else the script stops.

`--judged` also times a correct candidate, which the static step must not slow: with
`--keep-judge 0` (each checkout in turn), and through each checkout's warm judge
service (one eval starts it, then `--reps` evals; `krefine judge stop` after).

  python benchmarks/static_refusal.py [--repo DIR] [--baseline DIR] [--reps 7] [--judged] [--out FILE.json]

`--repo` names the checkout whose code is timed (default: this one), `--baseline`
another timed in the same rounds (`git worktree add --detach /tmp/before REV`: an older
revision); problems and candidates are read from each.
"""
from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

PROBLEM = "tests/exploits/problems/matmul.py"
CANDIDATE = "tests/exploits/torch_matmul.py"   # the forward calls torch.matmul: guard torch_compute
JUDGED = ("tests/problems/relu.py", "tests/problems/relu_ok.py", "--device", "cpu")   # correct


def eval_cmd(repo: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "agent.cli", "eval", *(str(repo / a) if a.endswith(".py") else a for a in args),
            "--json"]


def timed(cmd: list[str], repo: Path, verdict: str | None = None) -> float:
    """Wall seconds of one fresh process in `repo`, which must print `verdict` (exit 1 when
    "rejected", 0 when "correct") or, when None, exit 0."""
    env = {**os.environ, "PYTHONPATH": str(repo)}   # the checkout's code, not the installed one
    env.pop("KREFINE_KEEP_JUDGE_S", None)
    t0 = time.perf_counter()
    r = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=600)
    wall_s = time.perf_counter() - t0
    status = {None: 0, "correct": 0, "rejected": 1}[verdict]
    if r.returncode != status or (verdict and json.loads(r.stdout)["verdict"] != verdict):
        sys.exit(f"static_refusal: {' '.join(cmd[2:])} gave status {r.returncode}: {r.stdout[:300]} {r.stderr[-300:]}")
    return wall_s


def medians(rounds: dict[str, tuple[list[str], Path, str | None]], reps: int) -> dict[str, list[float]]:
    """Each command once untimed (the page cache, any one-time work), then `reps` rounds in
    turn, so a busy moment of the machine hits every command alike."""
    for cmd, repo, verdict in rounds.values():
        timed(cmd, repo, verdict)
    walls: dict[str, list[float]] = {k: [] for k in rounds}
    for _ in range(reps):
        for name, (cmd, repo, verdict) in rounds.items():
            walls[name].append(timed(cmd, repo, verdict))
    return walls


def warm_service(repo: Path, reps: int) -> list[float]:
    """`reps` evals of the correct candidate through `repo`'s judge service, started first."""
    cmd = [*eval_cmd(repo, *JUDGED), "--keep-judge", "120"]
    timed(cmd, repo, "correct")
    try:
        return [timed(cmd, repo, "correct") for _ in range(reps)]
    finally:
        timed([sys.executable, "-m", "agent.cli", "judge", "stop"], repo)


def _revision(repo: Path) -> str:
    return subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", type=Path, default=Path(__file__).resolve().parent.parent)
    ap.add_argument("--baseline", type=Path)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--judged", action="store_true")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    repos = {"": args.repo.resolve(), **({"baseline_": args.baseline.resolve()} if args.baseline else {})}
    rounds = {"import_torch": ([sys.executable, "-c", "import torch"], repos[""], None)}
    for label, repo in repos.items():
        refuse = eval_cmd(repo, PROBLEM, CANDIDATE)
        rounds[f"{label}eval_service_host"] = (refuse, repo, "rejected")
        rounds[f"{label}eval_keep_judge_0"] = ([*refuse, "--keep-judge", "0"], repo, "rejected")
    walls = medians(rounds, args.reps)
    if args.judged:
        walls.update(medians({f"{label}judged_keep_judge_0": ([*eval_cmd(repo, *JUDGED), "--keep-judge", "0"],
                                                                repo, "correct")
                              for label, repo in repos.items()}, args.reps))
        walls.update({f"{label}judged_warm_service": warm_service(repo, args.reps) for label, repo in repos.items()})
    median_s = {k: statistics.median(v) for k, v in walls.items()}
    result = {
        "revision": _revision(repos[""]), "baseline_revision": _revision(args.baseline) if args.baseline else None,
        "python": platform.python_version(), "torch": importlib.metadata.version("torch"),
        "triton": importlib.metadata.version("triton"), "cpus": os.cpu_count(), "reps": args.reps,
        "refused": [PROBLEM, CANDIDATE], "judged": list(JUDGED),
        "median_s": {k: round(v, 3) for k, v in median_s.items()},
        "walls_s": {k: [round(x, 3) for x in v] for k, v in walls.items()},
        "ratio_to_import_torch": {k: round(v / median_s["import_torch"], 2)
                                  for k, v in median_s.items() if "eval_" in k},
    }
    print(f"{result['revision']}" + (f" (baseline {result['baseline_revision']})" if args.baseline else "")
          + f": python {result['python']}, torch {result['torch']}, triton {result['triton']}, "
          f"{result['cpus']} CPUs, median of {args.reps}")
    for name, s in median_s.items():
        ratio = result["ratio_to_import_torch"].get(name)
        print(f"  {name:30s} {s:6.3f} s" + (f"   {ratio:.2f}x import torch" if ratio is not None else ""))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
