"""The problems of a bench whose correct seed trails torch.compile, as a --filter regex,
so a second pass can sweep only where the sweep can matter (issue 19):

    python3 benchmarks/kb_slow_seeds.py BENCH_DIR [--setting LABEL] [--below 0.9] [--max 20]

Reads BENCH_DIR/results.json (krefine bench's), the setting LABEL (default: the first),
and prints `^(17|18|47)_` for the problems whose seed is correct and at most --below
times torch.compile's speed, slowest first, at most --max of them; prints nothing when
there are none.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path


def slow_seeds(results: list[dict], below: float, limit: int) -> list[str]:
    slow = [(r["seed_speedup_compile"], r["problem"]) for r in results
            if r.get("seed") == "correct" and r.get("seed_speedup_compile") is not None
            and r["seed_speedup_compile"] <= below]
    return [name for _, name in sorted(slow)[:limit]]


def as_filter(names: list[str]) -> str:
    """`^(17|18)_` for KernelBench's numbered names; the names themselves otherwise."""
    numbers = [m.group(1) for n in names if (m := re.match(r"(\d+)_", n))]
    if len(numbers) == len(names):
        return f"^({'|'.join(numbers)})_" if numbers else ""
    return "^(" + "|".join(re.escape(n) for n in names) + ")$" if names else ""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("bench", type=Path)
    ap.add_argument("--setting", default=None)
    ap.add_argument("--below", type=float, default=0.9)
    ap.add_argument("--max", type=int, default=20)
    args = ap.parse_args()
    doc = json.loads((args.bench / "results.json").read_text(encoding="utf-8"))
    settings = doc["settings"]
    chosen = next((s for s in settings if s["label"] == args.setting), None) if args.setting else settings[0]
    if chosen is None:
        print(f"kb_slow_seeds: no setting {args.setting!r} in {args.bench / 'results.json'}", file=sys.stderr)
        return 2
    print(as_filter(slow_seeds(chosen["results"], args.below, args.max)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
