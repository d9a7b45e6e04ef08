"""Fill krefine's seed cache from captures made on the GPU (benchmarks/kb_captures.sh), so
a `krefine bench` of the suite on the GPU judges seeds instead of compiling them again:

    python3 benchmarks/kb_seed_cache.py CAPTURE_DIR LEVEL_DIR SEED_CACHE [--missing FILE]

For each problem of LEVEL_DIR: its default capture, converted; when that gives no seed
(or one the guards would reject), its capture with Triton templates; the entry is what
`python -m tools.dialect seed PROBLEM --device cuda --cache SEED_CACHE` would have
written on the GPU machine whose torch version (and module mode) the capture names
(tools/dialect/kernelbook.py `seed_candidate`, `SeedCache`). A capture that failed on
the GPU machine counts with the reason in CAPTURE_DIR/capture_log.tsv. Problems with nothing recorded are listed (--missing).
"""
from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tools.dialect.inductor_capture import read_capture  # noqa: E402
from tools.dialect.kernelbook import ATTEMPTS, seed_from  # noqa: E402
from tools.dialect.seedcache import SeedCache  # noqa: E402
from tools.problem import load_problem  # noqa: E402

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("captures"), ap.add_argument("level"), ap.add_argument("cache")
    ap.add_argument("--missing", help="write the names of problems with no capture here")
    args = ap.parse_args()
    cap_dir = Path(args.captures)
    logged: dict[tuple[str, str], str] = {}
    for row in csv.reader((cap_dir / "capture_log.tsv").open(encoding="utf-8"), delimiter="\t"):
        if len(row) >= 5:
            logged[(row[0], row[1])] = row[4].removeprefix("kernelbook: ")
    missing, counts = [], {"seed": 0, "no seed": 0}
    for path in sorted(Path(args.level).glob("*.py"), key=lambda p: int(p.name.split("_")[0])):
        name, problem = path.stem, load_problem(path)
        # each attempt's capture as the device recorded it, or its logged failure, in order,
        # up to the first the device did not get to
        attempts, torch_version, module_mode = [], "", "train"
        for label, templates in ATTEMPTS:
            mode = "templates" if templates else "default"
            f = cap_dir / "captures" / f"{name}.{mode}.py"
            if f.exists():
                cap = read_capture(f.read_text(encoding="utf-8"))
                torch_version, module_mode = cap.torch_version, cap.module_mode
                attempts.append((label, lambda cap=cap: cap))
            elif (name, mode) in logged:
                attempts.append((label, lambda why=logged[(name, mode)]: _fail(why)))
            else:
                break
        try:
            code, reason = seed_from(problem, attempts), ""
        except ValueError as e:
            code, reason = None, str(e)
        if not torch_version or (code is None and len(attempts) < len(ATTEMPTS)):
            missing.append(name)      # no capture to name the torch, or not every attempt known
            continue
        SeedCache(args.cache, module_mode).put(problem, "cuda", torch_version, code, reason)
        counts["seed" if code is not None else "no seed"] += 1
        print(f"{name}: {'seed' if code is not None else 'no seed: ' + reason[:150]}")
    print(f"cache {args.cache}: {counts['seed']} seeds, {counts['no seed']} without a seed, "
          f"{len(missing)} problems not captured")
    if args.missing:
        Path(args.missing).write_text("".join(f"{n}\n" for n in missing), encoding="utf-8")
    return 0


def _fail(why: str):
    raise ValueError(why)


if __name__ == "__main__":
    sys.exit(main())
