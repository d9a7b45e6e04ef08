"""The search's gains per problem from a `krefine bench --model none` directory (benchmarks/kernelbench.sh):
the seed (r00-c00, Inductor's first configuration, as every earlier table), the portfolio (the fastest correct
of round 0: each Inductor configuration and its tf32x3 dots), and the sweep's best (pre-screened variants judged
in full), each x eager / x torch.compile; then the suite figures. A problem whose run has no summary.json yet (a
bench interrupted mid-problem, resumed later) is listed as unfinished and left out of the figures. With --logs
(each call's OUT/log.txt of benchmarks/kernelbench.sh), GPU-hours are the calls' wall times the GPUs they had, and
the candidates judged and pre-screened are given per GPU-hour. A table run over several sessions whose bench
directories are not kept is put together from parts: --json writes one bench directory's rows and totals, and
--parts reads such files (or a table this script wrote, at its two decimals) and merges them; a problem finished
in two parts is refused. Usage:
    python -m agent.bench.kb_search_table [BENCH_DIR] [--logs LOG.txt ...] [--json PART.json]
                                         [--parts PART.json|TABLE.md ...] [--out FILE.md]
"""
from __future__ import annotations

import argparse
import json
import math
import re
import sys
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


# a training-mode BatchNorm's kernels: Inductor names one after the aten ops it fuses ("batch_norm"); krefine's
# batch-statistics family (tools/kernels/batchnorm.py) is batch_stats_kernel
BATCH_NORM_NAMES = ("batch_norm", "batch_stats")


def _time_split(v: dict) -> dict:
    """A correct verdict's per-call median (ms), its kernels' GPU time a call (ms, the sum of checks.kernel_breakdown)
    its launches a call, how many of them are a BatchNorm's and how many a library's (an ATen copy or fill: a
    kernel record's kind other than "triton"); None each where the verdict has no kernel record."""
    kernels = (v.get("checks") or {}).get("kernel_breakdown") or []
    ms = ((v.get("timing_ms") or {}).get("candidate") or {}).get("median")
    if not kernels or not ms or v.get("verdict") != "correct":
        return {"ms": None, "gpu_ms": None, "launches": None, "bn_launches": None, "library_launches": None}
    return {"ms": ms, "gpu_ms": sum(k["total_us"] for k in kernels) / 1000, "launches": sum(k["calls"] for k in kernels),
            "bn_launches": sum(k["calls"] for k in kernels if any(n in k["name"] for n in BATCH_NORM_NAMES)),
            "library_launches": sum(k["calls"] for k in kernels if k.get("kind", "triton") != "triton")}


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
            **{f"best_{k}": x for k, x in _time_split(vs[final] if final else {}).items()},
            "judged": len(vs), "prescreened": sum(len(s["variants"]) for s in screens),
            "prescreen_s": sum(s["seconds"] for s in screens),
            "judge_s": sum(sum((v.get("checks") or {}).get("phase_s", {}).values()) for v in vs.values()),
            "killed": [c for c, v in vs.items() if v.get("verdict") == "runtime_error" and "exited (signal 9)" in json.dumps(v)]}


def _x(v): return "—" if v is None else f"{v:.2f}"


_COLS = (("seed", "seed"), ("portfolio", "port"), ("best", "best"))


def figures(rows: list[dict]) -> dict[str, dict]:
    """Per "LEVEL COLUMN" (level1 seed, ...), over finished problems: counts and the log-sums of the geomeans,
    which add up across parts."""
    out = {}
    for r in rows:
        if not r["finished"]:
            continue
        level = r["problem"].split("__")[0]
        for col, key in _COLS:
            f = out.setdefault(f"{level} {col}", dict.fromkeys(
                ("n", "correct", "fast1", "fast15", "fast1_compile", "n_eager", "log_eager", "n_compile", "log_compile"), 0))
            e, c = r[f"{key}_eager"], r[f"{key}_compile"]
            f["n"] += 1
            f["correct"] += e is not None
            f["fast1"] += (e or 0) > 1
            f["fast15"] += (e or 0) > 1.5
            f["fast1_compile"] += (c or 0) > 1
            for base, x in (("eager", e), ("compile", c)):
                if x:
                    f[f"n_{base}"] += 1
                    f[f"log_{base}"] += math.log(x)
    return out


def _figure_lines(figs: dict[str, dict]) -> list[str]:
    out = []
    for name in sorted(figs, key=lambda k: (k.split()[0], [c for c, _ in _COLS].index(k.split()[1]))):
        f, (level, col) = figs[name], name.split()
        n = f["n"]
        geo = {b: f"{math.exp(f[f'log_{b}'] / f[f'n_{b}']):.2f}" if f[f"n_{b}"] else "nan" for b in ("eager", "compile")}
        out.append(f"- {level} ({n} problems), {col}: correct {f['correct']}/{n}; fast_1 vs eager {f['fast1'] / n:.2f}, "
                   f"fast_1.5 {f['fast15'] / n:.2f}; fast_1 vs compile {f['fast1_compile'] / n:.2f}; geomean (correct) "
                   f"{geo['eager']}× eager, {geo['compile']}× compile")
    return out


def order(name: str) -> tuple:
    """level1__2_X before level1__10_X: the level, then the problem's number."""
    m = re.match(r"(.*?)__(\d+)_", name)
    return (m.group(1), int(m.group(2)), name) if m else (name, 0, name)


def gpu_seconds(logs: list[Path]) -> tuple[float, int, int]:
    """(Σ wall × GPUs, calls, calls cut off) from benchmarks/kernelbench.sh logs: '== HH:MM:SS N GPU(s); ...'
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


def totals(rows: list[dict], gpu_s: float = 0.0, calls: int = 0, cut: int = 0) -> dict:
    """What a part cost: GPU wall (logs), candidates judged and variants pre-screened, its unfinished problems' too."""
    return {"gpu_s": gpu_s, "calls": calls, "cut": cut, "judged": sum(r["judged"] for r in rows),
            "prescreened": sum(r["prescreened"] for r in rows), "prescreen_s": sum(r["prescreen_s"] for r in rows),
            "judge_s": sum(r["judge_s"] for r in rows), "figures": figures(rows)}


def _cell(text: str) -> float | None:
    return None if text in ("—", "") else float(text)


def part_from_md(text: str) -> tuple[list[dict], dict]:
    """The rows and totals of a table this script wrote (its figures at two decimals; no seed verdict or judge
    time per problem, the totals from its summary lines)."""
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 10 or not re.match(r"level\d+__", cells[0]):
            continue
        row = {"problem": cells[0], "finished": not cells[1].startswith("(unfinished"), "seed": "",
               "prescreened": 0, "prescreen_s": 0.0, "judge_s": 0.0, "portfolio": "", "best_change": ""}
        if not row["finished"]:
            rows.append({**row, "judged": int(re.search(r"(\d+) judged", cells[1]).group(1))})
            continue
        port, pre = re.match(r"(\S+)(?: \((.*)\))?$", cells[3]), re.match(r"(\d+) \((\d+)\)", cells[9])
        if not port or not pre:
            raise ValueError(f"its row {cells[0]} is not one this script writes")
        (port, label), (pre, pre_s) = port.groups(), pre.groups()
        rows.append({**row, "seed_eager": _cell(cells[1]), "seed_compile": _cell(cells[2]),
                     "portfolio": "" if label in (None, "—") else label, "port_eager": _cell(port),
                     "port_compile": _cell(cells[4]), "best_eager": _cell(cells[5]), "best_compile": _cell(cells[6]),
                     "best_change": cells[7], "judged": int(cells[8]), "prescreened": int(pre),
                     "prescreen_s": float(pre_s)})
    tot = totals(rows)
    if m := re.search(r"^- GPU-hours: ([\d.]+) \((\d+) bench calls(?:.*?; (\d+) calls cut off)?", text, re.M):
        tot.update(gpu_s=float(m.group(1)) * 3600, calls=int(m.group(2)), cut=int(m.group(3) or 0))
    if m := re.search(r"^- pre-screen: (\d+) variants in (\d+) s .*full judge: (\d+) candidates in (\d+) s", text, re.M):
        tot.update(prescreened=int(m.group(1)), prescreen_s=float(m.group(2)), judged=int(m.group(3)),
                   judge_s=float(m.group(4)))
    for m in re.finditer(r"^- (level\d+) \((\d+) problems\), (\w+): correct (\d+)/\d+; fast_1 vs eager ([\d.]+), "
                         r"fast_1\.5 ([\d.]+); fast_1 vs compile ([\d.]+); geomean \(correct\) ([\d.]+|nan)× eager, "
                         r"([\d.]+|nan)× compile", text, re.M):
        # the counts behind the table's own figures, exact where its rows' two decimals are not ("1.00" > 1?)
        f, n = tot["figures"].get(f"{m.group(1)} {m.group(3)}"), int(m.group(2))
        if f is None or f["n"] != n or f["correct"] != int(m.group(4)):
            raise ValueError(f"its summary line for {m.group(1)} {m.group(3)} does not match its rows")
        f.update(fast1=round(float(m.group(5)) * n), fast15=round(float(m.group(6)) * n),
                 fast1_compile=round(float(m.group(7)) * n))
        for base, geo in (("eager", m.group(8)), ("compile", m.group(9))):
            f[f"log_{base}"] = f[f"n_{base}"] * math.log(float(geo)) if f[f"n_{base}"] else 0.0
    return rows, tot


def load_part(path: Path) -> tuple[list[dict], dict]:
    """A part: rows and totals from --json, or a table (.md) this script wrote."""
    try:
        if path.suffix == ".md":
            return part_from_md(path.read_text())
        doc = json.loads(path.read_text())
        return doc["rows"], doc["totals"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        _refuse(f"{path}: not a part (--json output or a table this script wrote): {e}")


def merge(parts: list[tuple[str, list[dict], dict]]) -> tuple[list[dict], dict]:
    """One table's rows and totals from parts: each problem's finished row (one part only), else its unfinished
    one; the totals summed, for a part's cost counts whether or not its problems finished there."""
    done: dict[str, tuple[str, dict]] = {}
    open_: dict[str, dict] = {}
    for name, rows, _ in parts:
        for r in rows:
            if not r["finished"]:
                open_[r["problem"]] = r
            elif r["problem"] in done:
                _refuse(f"{name}: {r['problem']} is finished in {done[r['problem']][0]} too; give each problem's "
                        "result once")
            else:
                done[r["problem"]] = (name, r)
    rows = [r for _, r in done.values()] + [r for p, r in open_.items() if p not in done]
    tot = {k: sum(t[k] for _, _, t in parts) for k in ("gpu_s", "calls", "cut", "judged", "prescreened",
                                                          "prescreen_s", "judge_s")}
    tot["figures"] = {}
    for _, _, t in parts:
        for name, f in t["figures"].items():
            into = tot["figures"].setdefault(name, dict.fromkeys(f, 0))
            for k, v in f.items():
                into[k] += v
    return sorted(rows, key=lambda r: order(r["problem"])), tot


def _refuse(why: str) -> None:
    print(f"kb_search_table.py: {why}", file=sys.stderr)
    raise SystemExit(2)


def table(rows: list[dict], gpu_s: float = 0.0, calls: int = 0, cut: int = 0, tot: dict | None = None) -> str:
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
    tot = tot or totals(rows, gpu_s, calls, cut)
    out += _figure_lines(tot["figures"])
    killed = [f"{r['problem']} {c}" for r in rows if r["finished"] for c in r.get("killed", [])]
    if killed:
        out.append(f"- killed (signal 9: a call's time limit or the OOM killer), recorded as runtime errors: {', '.join(killed)}")
    pre, pre_s, judged, judge_s = tot["prescreened"], tot["prescreen_s"], tot["judged"], tot["judge_s"]
    gpu_s, calls, cut = tot["gpu_s"], tot["calls"], tot["cut"]
    if gpu_s:
        h = gpu_s / 3600
        out.append(f"- GPU-hours: {h:.2f} ({calls} bench calls, their wall × GPUs"
                   f"{f'; {cut} calls cut off before their end line are not counted' if cut else ''}); per GPU-hour: "
                   f"{judged / h:.0f} candidates judged in full, {pre / h:.0f} variants pre-screened")
    out.append(f"- pre-screen: {pre} variants in {pre_s:.0f} s of GPU wall ({pre / pre_s:.2f} variants/s); full judge: "
               f"{judged} candidates in {judge_s:.0f} s of phase time ({judged / judge_s:.3f} candidates/s)"
               if pre_s and judge_s else "")
    out += idle_lines(rows)
    return "\n".join(out) + "\n"


def idle_lines(rows: list[dict]) -> list[str]:
    """Where each finished problem's fastest entry spends a call: its kernels' GPU time against the per-call
    median, the rest the GPU idles (the host launching, allocating, running Python), most idle first."""
    split = sorted((r for r in rows if r["finished"] and r.get("best_gpu_ms") is not None),
                   key=lambda r: r["best_gpu_ms"] / r["best_ms"])
    if not split:
        return []
    def share(r, key):   # a part written before the count: no figure
        return "—" if r.get(key) is None else f"{r[key] / r['best_launches']:.0%}"
    return ["", "| problem | fastest entry ms a call | its kernels' GPU ms | launches a call | of them BatchNorm's "
            "| of them a library's (ATen copies, fills) | GPU idle |", "|---|---|---|---|---|---|---|"] + [
        f"| {r['problem']} | {r['best_ms']:.3f} | {r['best_gpu_ms']:.3f} | {r['best_launches']} | "
        f"{share(r, 'best_bn_launches')} | {share(r, 'best_library_launches')} | "
        f"{max(0.0, 1 - r['best_gpu_ms'] / r['best_ms']):.0%} |" for r in split] + [""]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bench", nargs="?", help="a krefine bench --out directory")
    ap.add_argument("--out", help="the table (.md)")
    ap.add_argument("--logs", nargs="*", type=Path, default=[], help="each call's log.txt (GPU-hours)")
    ap.add_argument("--json", type=Path, help="write BENCH_DIR's rows and totals, a part for --parts")
    ap.add_argument("--parts", nargs="*", type=Path, default=[], help="earlier parts (.json) or tables (.md)")
    a = ap.parse_args()
    if not a.bench and not a.parts:
        _refuse("name a bench directory or --parts")
    if a.json and not a.bench:
        _refuse("--json writes a bench directory's part: name the bench directory")
    for log in a.logs:   # each read whole before a table is made: a missing one is named, nothing half written
        if not log.is_file():
            _refuse(f"{log}: no such log (--logs takes each call's log.txt)")
    parts = [(str(p), *load_part(p)) for p in a.parts]
    if a.bench:
        if not Path(a.bench).is_dir():
            _refuse(f"{a.bench}: no such bench directory")
        runs = sorted((p for p in Path(a.bench).glob("*/*") if (p / "evals").is_dir()), key=lambda p: order(p.name))
        rows = [row(r) for r in runs]
        tot = totals(rows, *gpu_seconds(a.logs))
        if a.json:
            a.json.write_text(json.dumps({"schema": 1, "rows": rows, "totals": tot}, indent=1) + "\n")
        parts.append((a.bench, rows, tot))
    rows, tot = merge(parts)
    text = table(rows, tot=tot)
    if len(parts) > 1:
        text += "- put together from " + ", ".join(p for p, _, _ in parts) + (
            "; a .md part's figures are its table's, at two decimals" if any(p.endswith(".md") for p, _, _ in parts) else "") + "\n"
    if a.out:
        Path(a.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
