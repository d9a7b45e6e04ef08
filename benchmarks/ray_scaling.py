"""Candidates judged per minute against the number of judge actors (issue 11).

A replayed suite (tests/fixtures/ray_suite's relu and affine problems, COPIES copies of
each under their own names, four hand-written candidates a problem in one round: correct,
incorrect, runtime_error, rejected) runs through `krefine bench` on one host (no Ray) and
then on a local Ray instance with 1, 2 and 4 judge actors (judge slots declared as the
custom resource krefine_gpu, Triton's interpreter; --device cpu). For each run:

  wall_min      the bench from start to results, judge actors' start-up included
  per_min       verdicts / wall minutes
  steady        verdicts per minute between the first verdict written and the last
  same_table    the suite table and scores equal the single-host run's

  python3 benchmarks/ray_scaling.py [--judges 1,2,4] [--copies 4] [--out DIR]

On a GPU cluster, run `krefine bench SUITE --ray` with `--set bench.judges=N` instead:
this script's local instance declares CPU judge slots only.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
FIXTURE = ROOT / "tests" / "fixtures" / "ray_suite"


def make_suite(root: Path, copies: int) -> tuple[Path, Path]:
    """COPIES copies of the fixture's relu and affine problems, each with four candidates."""
    def codes(name: str) -> list[str]:
        lines = (FIXTURE / "replays" / f"{name}.jsonl").read_text().splitlines()
        return [json.loads(line)["completion"] for line in lines]
    relu, affine = codes("1_relu"), codes("2_affine")
    # relu: both incorrect ones, and affine's correct and runtime_error candidates turned to relu
    relu_right = affine[2].replace("x * 2.0 + 1.0", "tl.maximum(x, 0.0)").replace("affine_kernel", "relu_kernel")
    rounds = {"1_relu": [relu[0], relu[1], relu_right, affine[3].replace("torch.addcmul(torch.ones_like(x), x, "
                                                                        "torch.full_like(x, 2.0))", "torch.relu(x)")],
              "2_affine": affine}
    problems, replays = root / "problems", root / "replays"
    problems.mkdir(parents=True)
    replays.mkdir()
    for i in range(copies):
        for name, completions in rounds.items():
            copy = f"{name}_{i}"
            shutil.copy(FIXTURE / "problems" / f"{name}.py", problems / f"{copy}.py")
            (replays / f"{copy}.jsonl").write_text("".join(json.dumps({"completion": c}) + "\n" for c in completions))
    return problems, replays


def run(problems: Path, replays: Path, out: Path, judges: int | None) -> dict:
    from agent.cli import main
    args = ["bench", str(problems), "--config", str(FIXTURE / "bench.toml"), "--device", "cpu",
            "--model", f"replay:{replays}/{{problem}}.jsonl", "--out", str(out),
            "--set", "budget.max_rounds=1", "--set", "budget.candidates_per_round=4"]
    if judges is not None:
        args += ["--ray", "auto", "--set", "bench.judge_resource=krefine_gpu", "--set", f"bench.judges={judges}"]
    t0 = time.time()
    assert main(args) == 0
    wall_s = time.time() - t0
    written = sorted(p.stat().st_mtime for p in out.glob("default/*/evals/*.json"))
    setting = json.loads((out / "results.json").read_text())["settings"][0]
    table = ([{k: v for k, v in r.items() if k not in ("run_dir", "tokens", "wall_s")} for r in setting["results"]],
             setting["scores"])
    return {"judges": judges or "single host", "verdicts": len(written), "wall_min": round(wall_s / 60, 2),
            "per_min": round(len(written) / (wall_s / 60), 1),
            "steady": round((len(written) - 1) / ((written[-1] - written[0]) / 60), 1) if len(written) > 1 else None,
            "table": table}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--judges", default="1,2,4")
    p.add_argument("--copies", type=int, default=4)
    p.add_argument("--out", default=None, help="write the figures here as JSON")
    a = p.parse_args()
    counts = [int(n) for n in a.judges.split(",")]
    import ray
    work = Path(tempfile.mkdtemp(prefix="krefine-ray-scaling-"))
    problems, replays = make_suite(work / "suite", a.copies)
    rows = [run(problems, replays, work / "single", None)]
    ray.init(address="local", resources={"krefine_gpu": max(counts)}, include_dashboard=False, logging_level="ERROR",
             log_to_driver=False)
    try:
        rows += [run(problems, replays, work / f"ray-{n}", n) for n in counts]
    finally:
        ray.shutdown()
    reference = rows[0]["table"]
    for row in rows:
        row["same_table"] = row.pop("table") == reference
    print(f"{'judges':>12} {'verdicts':>8} {'wall_min':>8} {'per_min':>8} {'steady':>8} same_table")
    for r in rows:
        print(f"{r['judges']!s:>12} {r['verdicts']:>8} {r['wall_min']:>8} {r['per_min']:>8} {r['steady']!s:>8} "
              f"{r['same_table']}")
    if a.out:
        Path(a.out).write_text(json.dumps(rows, indent=1))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
