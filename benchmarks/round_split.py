"""Time per round of a run, split by phase (generate / compile / test / time+profile /
decide) with the rest as orchestration, read from RUN_DIR/trace.jsonl.

  python benchmarks/round_split.py RUN_DIR
"""
from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from agent.loop.rundir import RunDir  # noqa: E402


def main(run_dir: str) -> int:
    events = list(RunDir(Path(run_dir)).events())
    rounds: dict[int, list[dict]] = defaultdict(list)
    for e in events:
        rounds[e["iteration"]].append(e)
    nodes = ("generate", "compile", "test", "profile", "decide")
    print("| round | candidates | wall s | " + " | ".join(f"{n} s" for n in nodes) + " | orchestration s |")
    print("|---|---|---|" + "---|" * (len(nodes) + 1))
    prev_end = None
    for r in sorted(rounds):
        evs = rounds[r]
        per = {n: sum(e["duration_s"] for e in evs if e["node"] == n) for n in nodes}
        first_start = min(e["ts"] - e["duration_s"] for e in evs)
        start = prev_end if prev_end is not None else first_start
        end = max(e["ts"] for e in evs)
        wall = end - start
        prev_end = end
        cands = len({e["candidate"] for e in evs if e["candidate"]})
        # candidates of a round run concurrently on several GPUs: phases can exceed wall
        orch = max(0.0, wall - sum(per.values()))
        print(f"| {r} | {cands} | {wall:.2f} | " + " | ".join(f"{per[n]:.2f}" for n in nodes) + f" | {orch:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
