"""`krefine bench`'s results: OUT/results.csv, results.json, results.md, bench.html and
the tables printed at the end, from every problem's ProblemResult (agent/bench/stats.py).

The per-problem table puts the seed (round 0's torch.compile seed alone: no sweep, no
model) beside the run's best (sweep variants and model candidates), the best's speedups
with their interval, the timing measure and `why`. results.md is that table in Markdown,
ready for BENCHMARKS.md, and the suite figures (benchstats.suite_figures). Every file is
written whole or not at all (tools/jsonio.write_text_atomic). Does not run problems or
read run dirs (agent/bench/suite.py and agent/loop/runstats.py do).
"""
from __future__ import annotations

import csv
import dataclasses
import io
from pathlib import Path

from rich.console import Console
from rich.table import Table

from agent.bench.stats import (FAST_P_THRESHOLDS, PASS_K, SUITE_FAST, ProblemResult, budget_curve, fast_p,
                              mean_pass_at_k, suite_figures)
from agent.loop.runstats import BASELINES, fmt_speedup
from tools.jsonio import write_json, write_text_atomic

# per_setting: [(agent.bench.suite.Setting, [ProblemResult, ...]), ...]: a Setting has .label and .overrides


def scores(results: list[ProblemResult]) -> dict:
    """fast_p per baseline, pass@k over round-1 samples and over all candidates, and the
    budget curve, keyed as results.json writes them."""
    def pass_at(pairs: list[tuple[int, int]]) -> dict:
        return {str(k): dict(zip(("mean", "problems"), mean_pass_at_k(pairs, k))) for k in PASS_K}
    return {
        "problems": len(results), "solved": sum(r.solved for r in results),
        "fast_p": {b: {f"{p:g}": fast_p(results, p, b) for p in FAST_P_THRESHOLDS} for b in BASELINES},
        "pass_at_k": {"round1": pass_at([(r.n_round1, r.c_round1) for r in results]),
                      "all": pass_at([(r.n_all, r.c_all) for r in results])},
        "budget_curve": budget_curve(results),
    }


def write_results(out: Path, suite: Path, per_setting: list[tuple]) -> None:
    from agent.cli.report import Series, SERIES_COLORS, line_chart, render
    # judge_s (one wall per candidate) is in results.json only; the CSV has one value per cell
    fields = [f.name for f in dataclasses.fields(ProblemResult) if f.name != "judge_s"]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=["setting", *fields], lineterminator="\n", extrasaction="ignore")
    w.writeheader()
    for s, results in per_setting:
        for r in results:
            w.writerow({"setting": s.label, **dataclasses.asdict(r)})
    write_text_atomic(out / "results.csv", buf.getvalue())
    scored = [(s, results, scores(results)) for s, results in per_setting]
    write_json(out / "results.json", {
        "schema": 1, "suite": str(suite),
        "settings": [{"label": s.label, "overrides": s.overrides, "scores": sc, "figures": suite_figures(results),
                      "results": [dataclasses.asdict(r) for r in results]} for s, results, sc in scored]})
    write_text_atomic(out / "results.md", results_markdown(suite, per_setting))
    curves = [Series(s.label, budget_curve(results), SERIES_COLORS[i % len(SERIES_COLORS)], step=True)
              for i, (s, results) in enumerate(per_setting)]
    top = max([b for c in curves for b, _ in c.points] + [1])
    chart = line_chart(curves, x_label="candidates spent", y_label="problems solved",
                       x_range=(1, top), y_range=(0.0, 1.0), y_percent=True)
    write_text_atomic(out / "bench.html", render(
        "bench", title=f"krefine bench: {suite.name}", suite=str(suite), suite_name=suite.name, out_dir=str(out),
        problems=len(per_setting[0][1]), budget_chart=chart, baselines=BASELINES, ks=PASS_K,
        thresholds=[f"{p:g}" for p in FAST_P_THRESHOLDS], fmt=fmt_speedup, cands=cands, colors={},
        settings=[{"label": s.label, "results": results, "scores": sc} for s, results, sc in scored]))


def print_results(console: Console, per_setting: list[tuple]) -> None:
    for s, results in per_setting:
        # a problem that could not run shows the kind of fault in "why"; its line above
        # and results.csv say why in full
        t = _table(f"results: {s.label}")
        for col in TERMINAL_COLUMNS:
            t.add_column(col, no_wrap=col not in ("problem", "why"), overflow="fold")
        for r in results:
            why = table_row(r, short_error=True)[-1]
            t.add_row(r.problem, r.seed, fmt_speedup(r.seed_speedup_eager), r.best_verdict,
                      fmt_speedup(r.speedup_eager), fmt_speedup(r.speedup_compile), cands(r), why)
        console.print(t)
        console.print(figures_text(suite_figures(results)), highlight=False)
    # one column per setting, so a sweep reads across
    scored = [(s, scores(results)) for s, results in per_setting]
    t = _table("scores")
    t.add_column("metric", no_wrap=True)
    for s, _ in scored:
        t.add_column(s.label, justify="right", overflow="fold")
    t.add_row("solved", *(f"{sc['solved']}/{sc['problems']}" for _, sc in scored))
    for b in BASELINES:
        for p in scored[0][1]["fast_p"][b]:
            t.add_row(f"fast_{p} vs {b}", *(_share(sc['fast_p'][b][p]) for _, sc in scored))
    for kind, what in (("round1", "round-1 samples"), ("all", "all candidates")):
        for k in PASS_K:
            t.add_row(f"pass@{k} {what}", *(_pass(sc["pass_at_k"][kind][str(k)]) for _, sc in scored))
    console.print(t)
    for s, results in per_setting:
        curve = budget_curve(results)
        marks = sorted({b for b in (1, 2, 4, 8, 16, 32, 64, 128) if b <= len(curve)} | {len(curve)})
        console.print(f"budget curve {s.label} (candidates: share solved): "
                      + "  ".join(f"{b}: {curve[b - 1][1]:.0%}" for b in marks), highlight=False)


TABLE_COLUMNS = ("problem", "seed", "seed ×eager", "seed ×compile", "best", "×eager [interval]",
                 "×compile [interval]", "measure", "rounds", "cands", "wall", "why")
# cands: the model's candidates judged, "+N" the sweep's variants
# the terminal's narrower table: intervals, measure and wall are in results.md and .csv
TERMINAL_COLUMNS = ("problem", "seed", "seed ×eager", "best", "×eager", "×compile", "cands", "why")


def table_row(r: ProblemResult, short_error: bool = False) -> list[str]:
    """One problem's cells, in TABLE_COLUMNS order (the terminal's and results.md's)."""
    why = r.why
    if r.error:
        why = r.error.partition(":")[0] if short_error else r.error
    return [r.problem, r.seed, fmt_speedup(r.seed_speedup_eager), fmt_speedup(r.seed_speedup_compile),
            r.best_verdict, fmt_interval(r.speedup_eager, r.eager_low, r.eager_high),
            fmt_interval(r.speedup_compile, r.compile_low, r.compile_high), r.measure or "—",
            str(r.rounds), cands(r), "—" if r.wall_s is None else f"{r.wall_s:.0f} s", why or ""]


def _share(v: float | None) -> str:
    """A fast_p share, "—" where nothing was timed."""
    return "—" if v is None else f"{v:.2f}"


def cands(r: ProblemResult) -> str:
    """"4", or "4+6" with 6 sweep variants judged beside the model's 4 candidates."""
    return f"{r.candidates}+{r.sweep}" if r.sweep else str(r.candidates)


def fmt_interval(x: float | None, low: float | None, high: float | None) -> str:
    """"1.45× [1.40–1.50]"; the speedup alone when it has no interval, "—" when untimed."""
    if x is None:
        return "—"
    if low is None or high is None:
        return fmt_speedup(x)
    return f"{fmt_speedup(x)} [{low:.2f}–{high:.2f}]"


def results_markdown(suite: Path, per_setting: list[tuple]) -> str:
    """results.md: per setting, the per-problem table and the suite figures, in Markdown."""
    lines = [f"# krefine bench: {suite.name}", "",
             "seed: round 0's torch.compile seed alone (no sweep, no model); best: the run's best "
             "correct candidate beyond it (sweep variants, model candidates). Speedups are "
             "baseline time / kernel time, with their 90% interval; why: why the run did not "
             "deliver a correct kernel faster than eager.", ""]
    for s, results in per_setting:
        lines += [f"## {s.label}", "", "| " + " | ".join(TABLE_COLUMNS) + " |",
                  "|" + "|".join("---" for _ in TABLE_COLUMNS) + "|"]
        lines += ["| " + " | ".join(_md_cell(c) for c in table_row(r)) + " |" for r in results]
        lines += ["", figures_markdown(suite_figures(results)), ""]
    return "\n".join(lines)


def figures_markdown(fig: dict) -> str:
    """benchstats.suite_figures as a Markdown table (seed | best) and a few lines."""
    n = fig["problems"]
    rows = [("correct", lambda side: f"{side['correct']}/{n} ({side['correct_share']:.0%})")]
    for b, name in (("eager", "eager"), ("compile", "torch.compile")):
        for p in SUITE_FAST:
            rows.append((f"fast_{p:g} vs {name}", lambda side, b=b, p=p: _share(side['fast'][b][f'{p:g}'])))
    for b, name in (("eager", "eager"), ("compile", "torch.compile")):
        rows.append((f"geometric mean vs {name} (correct, timed)", lambda side, b=b: _geo(side["geomean"][b])))
    out = ["| | seed | best |", "|---|---|---|"]
    out += [f"| {label} | {cell(fig['seed'])} | {cell(fig['best'])} |" for label, cell in rows]
    out += ["", *(f"- {line}" for line in _figure_lines(fig))]
    return "\n".join(out)


def figures_text(fig: dict) -> str:
    """The suite figures for the terminal: one line each."""
    n = fig["problems"]
    parts = []
    for of in ("seed", "best"):
        side = fig[of]
        fast = ", ".join(f"fast_{p} {b} {_share(v)}" for b in BASELINES for p, v in side["fast"][b].items())
        parts.append(f"{of}: correct {side['correct']}/{n}; {fast}; geomean eager {_geo(side['geomean']['eager'])}, "
                     f"compile {_geo(side['geomean']['compile'])}")
    return "\n".join(parts + _figure_lines(fig))


def _figure_lines(fig: dict) -> list[str]:
    judge, cov = fig["judge_s"], fig["seed_coverage"]
    gain = fig["gain_over_seed"]
    return [
        f"best over seed (what the sweep and the model added): {_geo(gain['eager'])} vs eager, "
        f"{_geo(gain['compile'])} vs torch.compile",
        "judge wall per candidate: " + ("—" if judge["mean"] is None else
                                        f"mean {judge['mean']:.2f} s, median {judge['median']:.2f} s "
                                        f"over {judge['candidates']} candidates"),
        f"GPU time (judge walls on cuda): {fig['gpu_s']:.0f} s; runs' wall: {fig['wall_s']:.0f} s",
        f"seed coverage (correct pure-Triton seeds / all): {cov['correct']}/{cov['problems']}",
    ]


def _geo(g: dict) -> str:
    return "—" if g["value"] is None else f"{fmt_speedup(g['value'])} (n={g['over']})"


def _md_cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _table(title: str) -> Table:
    return Table(title=title, box=None, pad_edge=False, header_style="bold underline")


def _pass(v: dict) -> str:
    return "—" if v["mean"] is None else f"{v['mean']:.2f} (n={v['problems']})"
