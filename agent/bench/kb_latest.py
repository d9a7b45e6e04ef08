"""The latest figure of each problem over runs at several code versions, and its bench scores.

A level judged in parts (a few networks at a time, each part at the code of its day) is scored
on each problem's latest correct figure: the fastest correct entry of the latest run that judged
it correct. The runs are read in the order given (oldest first): a manifest names them, one file
a line (`#` starts a comment), since files of one date cannot be ordered by name. Each file is
either KernelBench's harness beside krefine (`python -m agent.bench.kb_harness`'s JSONL: krefine's
verdict and speedup over eager for every seed and portfolio entry) or a part of
`python -m agent.bench.kb_search_table --json` (each problem's best entry, over eager and
torch.compile). A later run where a problem has no correct figure (no seed, every entry wrong, or
a correct entry without a speedup) leaves its earlier figure in place and is named beside it.

    python -m agent.bench.kb_latest --manifest benchmarks/results/level3_runs.txt --total 50 [--out T.md]

Scores as agent/bench/stats.py's: fast_p is the share of `--total` problems with a correct
figure above p; the geometric means are over the problems with a figure (over torch.compile:
those whose latest figure has one). Bad input is one line on stderr and exit status 2.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from agent.bench.kb_search_table import order
from agent.bench.stats import _geomean
from tools.errors import EXIT_BAD_INPUT, BadInput


def read_run(path: Path) -> dict[str, dict]:
    """{problem: {"eager", "compile" (or None), "correct"}} of one run: the fastest correct entry
    of each problem it judged; a problem it judged without a correct figure has correct False."""
    if not path.is_file():
        raise BadInput(path, "no such run file")
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        return _from_harness(path, text)
    if path.suffix == ".json":
        return _from_part(path, text)
    raise BadInput(path, "not a run file (a kb_harness .jsonl or a kb_search_table --json part)")


def _from_harness(path: Path, text: str) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
            problem, k = r["problem"], r["krefine"]
        except (ValueError, KeyError, TypeError) as e:
            raise BadInput(path, f"line {n} is not a kb_harness record ({type(e).__name__}: {e})") from None
        speedup = k.get("speedup_eager") if k.get("correct") else None
        _keep(out, problem, speedup, None)
    return out


def _from_part(path: Path, text: str) -> dict[str, dict]:
    try:
        rows = json.loads(text)["rows"]
        out: dict[str, dict] = {}
        for r in rows:
            if r["finished"]:
                _keep(out, r["problem"], r.get("best_eager"), r.get("best_compile"))
    except (ValueError, KeyError, TypeError) as e:
        raise BadInput(path, f"not a kb_search_table --json part ({type(e).__name__}: {e})") from None
    return out


def _keep(out: dict, problem: str, eager, compile_) -> None:
    """The faster of the entry seen and `problem`'s kept one; an entry without a figure marks it judged."""
    got = out.setdefault(problem, {"eager": None, "compile": None, "correct": False})
    if isinstance(eager, (int, float)) and eager > 0 and (got["eager"] is None or eager > got["eager"]):
        got.update(eager=float(eager), correct=True,
                   compile=float(compile_) if isinstance(compile_, (int, float)) and compile_ > 0 else None)


def latest(runs: list[tuple[str, dict[str, dict]]]) -> dict[str, dict]:
    """{problem: {"eager", "compile", "run", "later"}}: the latest run's correct figure; "later" names
    the runs after it that judged the problem without a correct figure."""
    kept: dict[str, dict] = {}
    for name, run in runs:
        for problem, got in run.items():
            if got["correct"]:
                kept[problem] = {"eager": got["eager"], "compile": got["compile"], "run": name, "later": []}
            else:
                kept.setdefault(problem, {"eager": None, "compile": None, "run": None, "later": []})["later"].append(name)
    return kept


def scores(kept: dict[str, dict], total: int) -> dict:
    """fast_1 and fast_1.5 over eager (of `total`), geometric means over the problems with figures."""
    eager = [v["eager"] for v in kept.values() if v["eager"]]
    comp = [v["compile"] for v in kept.values() if v["eager"] and v["compile"]]
    return {"total": total, "with_figure": len(eager), "fast_1": sum(x > 1 for x in eager) / total,
            "fast_1_count": sum(x > 1 for x in eager), "fast_1.5": sum(x > 1.5 for x in eager) / total,
            "fast_1.5_count": sum(x > 1.5 for x in eager), "geomean_eager": _geomean(eager)["value"],
            "geomean_compile": _geomean(comp)["value"], "with_compile": len(comp)}


def read_manifest(path: Path) -> list[Path]:
    """The run files a manifest names, in its order, relative to the current directory."""
    if not path.is_file():
        raise BadInput(path, "no such manifest")
    files = [Path(line.split("#", 1)[0].strip()) for line in path.read_text(encoding="utf-8").splitlines()]
    files = [f for f in files if str(f) not in ("", ".")]
    if not files:
        raise BadInput(path, "names no run file")
    return files


def report(kept: dict[str, dict], s: dict) -> str:
    lines = ["| problem | latest ×eager | ×torch.compile | run | later runs without a correct figure |",
             "|---|---|---|---|---|"]
    for p in sorted(kept, key=order):
        v = kept[p]
        fig = f"{v['eager']:.2f}" if v["eager"] else "—"
        comp = f"{v['compile']:.2f}" if v["compile"] else "—"
        lines.append(f"| {p} | {fig} | {comp} | {v['run'] or '—'} | {', '.join(v['later'])} |")
    g = s["geomean_compile"]
    lines += ["", f"- {s['with_figure']} of {s['total']} with a correct figure; fast_1 vs eager {s['fast_1']:.2f} "
              f"({s['fast_1_count']} of {s['total']}), fast_1.5 {s['fast_1.5']:.2f} ({s['fast_1.5_count']}); geomean "
              f"{s['geomean_eager']:.2f}× eager over {s['with_figure']}" if s["geomean_eager"] else "- no correct figure",
              f"- geomean vs torch.compile: {g:.2f}× over the {s['with_compile']} whose latest run recorded it"
              if g else "- no run recorded a figure over torch.compile"]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m agent.bench.kb_latest", description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="*", type=Path, help="run files, oldest first")
    ap.add_argument("--manifest", type=Path, help="a file naming the run files, oldest first")
    ap.add_argument("--total", type=int, help="problems in the level (fast_p's denominator)")
    ap.add_argument("--out", type=Path, help="also write the table here (.md)")
    a = ap.parse_args(argv)
    try:
        files = (read_manifest(a.manifest) if a.manifest else []) + list(a.runs)
        if not files:
            raise BadInput("", "kb_latest: name run files or --manifest")
        kept = latest([(f.name, read_run(f)) for f in files])
        total = a.total if a.total is not None else len(kept)
        if total < len(kept):
            raise BadInput("", f"kb_latest: --total {total} is below the {len(kept)} problems the runs judged")
    except BadInput as e:
        print(str(e), file=sys.stderr)
        return EXIT_BAD_INPUT
    text = report(kept, scores(kept, total))
    if a.out:
        a.out.write_text(text, encoding="utf-8")
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
