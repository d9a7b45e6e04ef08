"""The search's gains per problem from a `krefine bench --model none` directory (benchmarks/kb_search_gpu.sh):
the seed (r00-c00, Inductor's first configuration, as every earlier table), the portfolio (the fastest correct
of round 0: each Inductor configuration and its tf32x3 dots), and the sweep's best (pre-screened variants judged
in full), each x eager / x torch.compile; then the suite figures. A problem whose run has no summary.json yet (a
bench interrupted mid-problem, resumed later) is listed as unfinished and left out of the figures. With --logs
(each call's OUT/log.txt of benchmarks/kb_search_gpu.sh), GPU-hours are the calls' wall times the GPUs they had, and
the candidates judged and pre-screened are given per GPU-hour. Usage:
    python benchmarks/kb_search_table.py BENCH_DIR [--out FILE.md] [--logs LOG.txt ...]
"""
from __future__ import annotations

import argparse
import json
import math
import re
from pathlib import Path


def _verdicts(run: Path) -> dict[str, dict]:
    return {f.stem: json.loads(f.read_text()) for f in sorted((run / "evals").glob("*.json"))}


def _labels(run: Path) -> dict[str, str]:
    out = {}
    for line in (run / "trace.jsonl").read_text().splitlines():
        e = json.loads(line)
        if e["node"] == "generate" and e.get("candidate"):
            m = e.get("metrics") or {}
            out[e["candidate"]] = m.get("change") or m.get("origin") or ""
    return out


def _speed(v: dict, base: str) -> float | None:
    return (v.get("speedup") or {}).get(base) if v.get("verdict") == "correct" else None


def row(run: Path) -> dict:
    vs, labels = _verdicts(run), _labels(run)
    seed = vs.get("r00-c00", {})
    r0 = {c: v for c, v in vs.items() if c.startswith("r00-") and labels.get(c, "").startswith(("Inductor", "inductor_seed"))}
    r0["r00-c00"] = seed
    port = max((c for c in r0 if _speed(r0[c], "eager")), key=lambda c: _speed(r0[c], "eager"), default=None)
    sweep = {c: v for c, v in vs.items() if c not in r0}
    best = max((c for c in sweep if _speed(sweep[c], "eager")), key=lambda c: _speed(sweep[c], "eager"), default=None)
    screens = [json.loads(f.read_text()) for f in (run / "prescreen").glob("*.json")] if (run / "prescreen").exists() else []
    final = max(filter(None, (port, best)), key=lambda c: _speed(vs[c], "eager"), default=None)
    return {"problem": run.name, "finished": (run / "summary.json").is_file(), "seed": seed.get("verdict", "none"),
            "seed_eager": _speed(seed, "eager"), "seed_compile": _speed(seed, "compile"),
            "portfolio": labels.get(port, "") if port else "", "port_eager": _speed(vs[port], "eager") if port else None,
            "port_compile": _speed(vs[port], "compile") if port else None,
            "best_eager": _speed(vs[final], "eager") if final else None,
            "best_compile": _speed(vs[final], "compile") if final else None,
            "best_change": labels.get(final, "") if final and final == best else "(portfolio)",
            "judged": len(vs), "prescreened": sum(len(s["variants"]) for s in screens),
            "prescreen_s": sum(s["seconds"] for s in screens),
            "judge_s": sum(sum((v.get("checks") or {}).get("phase_s", {}).values()) for v in vs.values())}


def _x(v): return "—" if v is None else f"{v:.2f}"


def _geo(xs):
    xs = [x for x in xs if x]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


def order(name: str) -> tuple:
    """level1__2_X before level1__10_X: the level, then the problem's number."""
    m = re.match(r"(.*?)__(\d+)_", name)
    return (m.group(1), int(m.group(2)), name) if m else (name, 0, name)


def gpu_seconds(logs: list[Path]) -> tuple[float, int, int]:
    """(Σ wall × GPUs, calls, calls cut off) from benchmarks/kb_search_gpu.sh logs: '== HH:MM:SS N GPU(s); ...'
    opens a call, '== end HH:MM:SS (S s)' closes it; a call with no end line (killed) has no wall to count."""
    total, calls, cut = 0.0, 0, 0
    for log in logs:
        gpus = None
        for line in log.read_text(errors="replace").splitlines():
            if m := re.match(r"== \d\d:\d\d:\d\d (\d+) GPU", line):
                cut += gpus is not None
                gpus = int(m.group(1))
            elif (m := re.match(r"== end \S+ \((\d+) s\)", line)) and gpus:
                total, calls, gpus = total + int(m.group(1)) * gpus, calls + 1, None
        cut += gpus is not None
    return total, calls, cut


def table(rows: list[dict], gpu_s: float = 0.0, calls: int = 0, cut: int = 0) -> str:
    out = ["| problem | seed ×eager | ×compile | portfolio (configuration) ×eager | ×compile | best ×eager | ×compile "
           "| best's change | judged | pre-screened (s) |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if not r["finished"]:
            out.append(f"| {r['problem']} | (unfinished: {r['judged']} judged so far) | | | | | | | | |")
            continue
        out.append(f"| {r['problem']} | {_x(r['seed_eager'])} | {_x(r['seed_compile'])} | {_x(r['port_eager'])} "
                   f"({r['portfolio'].removeprefix('Inductor ') or '—'}) | {_x(r['port_compile'])} | "
                   f"{_x(r['best_eager'])} | {_x(r['best_compile'])} | {r['best_change'][:70]} | {r['judged']} | "
                   f"{r['prescreened']} ({r['prescreen_s']:.0f}) |")
    out.append("")
    left = [r["problem"] for r in rows if not r["finished"]]
    if left:
        out.append(f"- partial: {len(rows) - len(left)} of {len(rows)} problems finished; the figures below leave out "
                   f"the {len(left)} unfinished ({', '.join(left[:5])}{', ...' if len(left) > 5 else ''})")
    done = [r for r in rows if r["finished"]]
    for level in ("level1", "level2"):
        rs = [r for r in done if r["problem"].startswith(level)]
        if not rs:
            continue
        n = len(rs)
        for col, key in (("seed", "seed"), ("portfolio", "port"), ("best", "best")):
            e = [r[f"{key}_eager"] for r in rs]
            c = [r[f"{key}_compile"] for r in rs]
            out.append(f"- {level} ({n} problems), {col}: correct {sum(x is not None for x in e)}/{n}; "
                       f"fast_1 vs eager {sum((x or 0) > 1 for x in e) / n:.2f}, fast_1.5 {sum((x or 0) > 1.5 for x in e) / n:.2f}; "
                       f"fast_1 vs compile {sum((x or 0) > 1 for x in c) / n:.2f}; geomean (correct) {_geo(e):.2f}× eager, "
                       f"{_geo(c):.2f}× compile")
    pre = sum(r["prescreened"] for r in rows)
    pre_s = sum(r["prescreen_s"] for r in rows)
    judged = sum(r["judged"] for r in rows)
    judge_s = sum(r["judge_s"] for r in rows)
    if gpu_s:
        h = gpu_s / 3600
        out.append(f"- GPU-hours: {h:.2f} ({calls} bench calls, their wall × GPUs"
                   f"{f'; {cut} calls cut off before their end line are not counted' if cut else ''}); per GPU-hour: "
                   f"{judged / h:.0f} candidates judged in full, {pre / h:.0f} variants pre-screened")
    out.append(f"- pre-screen: {pre} variants in {pre_s:.0f} s of GPU wall ({pre / pre_s:.2f} variants/s); full judge: "
               f"{judged} candidates in {judge_s:.0f} s of phase time ({judged / judge_s:.3f} candidates/s)"
               if pre_s and judge_s else "")
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bench")
    ap.add_argument("--out")
    ap.add_argument("--logs", nargs="*", type=Path, default=[], help="each call's log.txt (GPU-hours)")
    a = ap.parse_args()
    runs = sorted((p for p in Path(a.bench).glob("*/*") if (p / "evals").is_dir()), key=lambda p: order(p.name))
    text = table([row(r) for r in runs], *gpu_seconds(a.logs))
    if a.out:
        Path(a.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
