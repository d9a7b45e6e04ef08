"""`krefine report RUN_DIR` -> RUN_DIR/report.html, and the HTML pieces bench reuses.

The page is one self-contained file (prompts/report.html.j2): inline CSS, inline SVG
charts, a few lines of inline JS, code highlighted at build time with pygments, and a
Content-Security-Policy that forbids every outside fetch, so it works offline and a
stray link cannot load anything. It shows the outcome, speedup by round, the verdict
mix by round, the lineage tree, every candidate (code, diff to its parent, the feedback
its prompt carried and the feedback it got, timings and profile), and the best kernel.

Charts are drawn here as SVG strings (`line_chart`, `stacked_bars`); `render` is the
one Jinja environment for HTML pages (autoescaped), used by `krefine bench` too.
Does not read run dirs itself: agent/loop/runstats.py does.
"""
from __future__ import annotations

import html
import math
import time
from dataclasses import dataclass

from markupsafe import Markup
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import DiffLexer, PythonLexer

from agent.cli.inspect import origin_label
from agent.loop.runstats import (BASELINES, Candidate, RunSnapshot, children, diff_to_parent, fmt_speedup,
                            judged_text, load_run, no_best_line, rounds_table, run_judged)
from tools.errors import check_writable
from tools.templates import environment

VERDICT_COLORS = {"correct": "#2e9d4f", "incorrect": "#d9822b", "compile_error": "#c23030",
                  "runtime_error": "#a82a7e", "timeout": "#5c6bc0", "rejected": "#6b6b6b",
                  "pending": "#b8b8b8"}
BASELINE_COLORS = {"eager": "#1f6fd1", "compile": "#e8590c"}
SERIES_COLORS = ("#1f6fd1", "#e8590c", "#2e9d4f", "#a82a7e", "#5c6bc0", "#8d6e00", "#00838f")


def main(args) -> int:
    run = load_run(args.run_dir)
    check_writable(run.dir.report, "the report", directory=False)
    run.dir.write_text(run.dir.report, render("run", **run_page(run)))
    print(f"wrote {run.dir.report}")
    return 0


# ---------------------------------------------------------------- the run page

def run_page(run: RunSnapshot) -> dict:
    """Everything report.html.j2's run page shows, as plain values and Markup."""
    rows = rounds_table(run)
    kids = children(run)
    def tree(cid: str) -> dict:
        return {"c": run.candidates[cid], "origin": origin_label(run, run.candidates[cid]),
                "children": [tree(k) for k in kids.get(cid, [])]}
    budget = (run.meta.get("config") or {}).get("budget") or {}
    best_src = run.text(run.dir.best)
    return {
        "title": f"krefine report: {run.name}",
        "run": run, "summary": run.summary or {}, "meta": run.meta,
        "problem_path": run.problem_path, "problem_source": run.problem_source,
        "rounds": rows, "fmt": fmt_speedup, "baselines": BASELINES,
        "speedup_chart": speedup_chart(run, rows, budget.get("target_speedup"), budget.get("target_baseline", "eager")),
        "verdict_chart": stacked_bars([(f"round {r.round}", r.verdicts) for r in rows], VERDICT_COLORS),
        "lineage": [tree(cid) for cid in kids.get(None, [])],
        "candidates": [candidate_view(run, c) for c in run.candidates.values()],
        "best_code": Markup(_python_html(best_src)) if best_src is not None else None,
        "colors": VERDICT_COLORS,
        "no_best": no_best_line(run.summary or {}),
        "judged": judged_text(run_judged(run)),
    }


def candidate_view(run: RunSnapshot, c: Candidate) -> dict:
    v = c.verdict or {}
    parent = run.parent_of(c.id)
    src = run.text(run.dir.candidate_src(c.id))
    diff = diff_to_parent(run, c.id)
    timings = [(name, t) for name, t in (v.get("timing_ms") or {}).items() if t]
    bottleneck = v.get("bottleneck") or {}
    return {
        "c": c, "parent": parent, "best": c.id == run.best_id, "origin": origin_label(run, c),
        "diagnostics": v.get("diagnostics", []), "flags": v.get("flags", []),
        "timings": timings, "kernels": v.get("kernels", []),
        "bottleneck_text": _bottleneck_text(bottleneck),
        "bottleneck_items": [(k, x) for k, x in bottleneck.items() if isinstance(x, (int, float, str)) and k not in ("summary", "label")],
        "code": Markup(_python_html(src)) if src is not None else None,
        "diff": Markup(_highlight(diff, DiffLexer())) if diff else None,
        "prompt": run.text(run.dir.prompt(c.id)), "completion": run.text(run.dir.completion(c.id)),
    }


def speedup_chart(run: RunSnapshot, rows, target: float | None, target_baseline: str) -> Markup | None:
    """Best-so-far speedup by round (lines) over every correct candidate (dots); None when
    nothing was timed (a cpu run)."""
    series = []
    for b in BASELINES:
        dots = [(c.round, c.speedup[b]) for c in run.candidates.values() if c.correct and c.speedup[b] is not None]
        line = [(r.round, r.best_so_far[b]) for r in rows if r.best_so_far[b] is not None]
        name = "eager" if b == "eager" else "torch.compile"
        if line:
            series.append(Series(f"best so far vs {name}", line, BASELINE_COLORS[b]))
            series.append(Series(f"each correct candidate vs {name}", dots, BASELINE_COLORS[b], line=False, faint=True))
    if not series:
        return None
    hlines = [(1.0, "1× (baseline)")]
    if target:
        hlines.append((float(target), f"target {target}× vs {target_baseline}"))
    return line_chart(series, x_label="round", y_label="speedup (×)", hlines=hlines,
                      x_range=(1, max((r.round for r in rows), default=1)))


# ---------------------------------------------------------------- charts (inline SVG)

@dataclass(frozen=True)
class Series:
    name: str
    points: list[tuple[float, float]]
    color: str
    line: bool = True               # False: dots only
    faint: bool = False
    step: bool = False              # hold each value until the next x (a cumulative count)


W, H = 720, 320
PAD_L, PAD_R, PAD_T, PAD_B = 56, 16, 44, 44


def line_chart(series: list[Series], *, x_label: str, y_label: str, x_range: tuple[int, int],
               y_range: tuple[float, float] | None = None, hlines=(), y_percent: bool = False) -> Markup:
    """Lines and dots over integer x, with a legend on top; each point has a hover title."""
    ys = [y for s in series for _, y in s.points] + [y for y, _ in hlines]
    lo, hi = y_range or (0.0, _nice_ceiling(max(ys + [1e-9]) * 1.1))
    x0, x1 = x_range[0], max(x_range[1], x_range[0] + 1)
    def px(x: float) -> float:
        return PAD_L + (x - x0) / (x1 - x0) * (W - PAD_L - PAD_R)
    def py(y: float) -> float:
        return H - PAD_B - (y - lo) / (hi - lo) * (H - PAD_T - PAD_B)
    fmt_y = (lambda y: f"{y:.0%}") if y_percent else (lambda y: f"{y:g}")
    out = [_axes(px, py, x0, x1, lo, hi, x_label, y_label, fmt_y)]
    for y, label in hlines:
        out.append(f'<line x1="{PAD_L}" x2="{W - PAD_R}" y1="{py(y):.1f}" y2="{py(y):.1f}" class="hline"/>'
                   f'<text x="{PAD_L + 4}" y="{py(y) - 3:.1f}" class="hlabel">{_e(label)}</text>')
    for s in series:
        pts = sorted(s.points)
        opacity = ' opacity="0.45"' if s.faint else ""
        if s.line and len(pts) > 1:
            corners = pts if not s.step else [p for a, b in zip(pts, pts[1:]) for p in (a, (b[0], a[1]))] + pts[-1:]
            path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in corners)
            out.append(f'<polyline points="{path}" fill="none" stroke="{s.color}" stroke-width="2"/>')
        for x, y in pts:
            out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="{3 if s.faint else 4}" fill="{s.color}"{opacity}>'
                       f'<title>{_e(s.name)}: {x:g}, {_e(fmt_y(y))}</title></circle>')
    out.append(_legend([(s.name, s.color, s.faint) for s in series]))
    return _svg(out, f"{y_label} by {x_label}")


def stacked_bars(groups: list[tuple[str, dict[str, int]]], colors: dict[str, str]) -> Markup:
    """One bar per group, stacked by key in `colors` order; counts on hover."""
    hi = 4 * math.ceil(max([sum(g.values()) for _, g in groups] + [1]) / 4)  # whole-number ticks
    def py(y: float) -> float:
        return H - PAD_B - y / hi * (H - PAD_T - PAD_B)
    slot = (W - PAD_L - PAD_R) / max(1, len(groups))
    out = [_axes(None, py, 0, 0, 0, hi, "", "candidates", lambda y: f"{y:g}")]
    for i, (label, counts) in enumerate(groups):
        x, base = PAD_L + i * slot + slot * 0.2, 0
        for key in colors:
            n = counts.get(key, 0)
            if n:
                out.append(f'<rect x="{x:.1f}" y="{py(base + n):.1f}" width="{slot * 0.6:.1f}" '
                           f'height="{py(base) - py(base + n):.1f}" fill="{colors[key]}">'
                           f'<title>{_e(label)}: {n} {_e(key)}</title></rect>')
                base += n
        out.append(f'<text x="{x + slot * 0.3:.1f}" y="{H - PAD_B + 16}" text-anchor="middle">{_e(label)}</text>')
    used = [k for k in colors if any(k in g for _, g in groups)]
    out.append(_legend([(k, colors[k], False) for k in used]))
    return _svg(out, "verdicts by round")


def _axes(px, py, x0, x1, lo, hi, x_label, y_label, fmt_y) -> str:
    out = [f'<line x1="{PAD_L}" x2="{PAD_L}" y1="{PAD_T}" y2="{H - PAD_B}" class="axis"/>',
           f'<line x1="{PAD_L}" x2="{W - PAD_R}" y1="{H - PAD_B}" y2="{H - PAD_B}" class="axis"/>']
    for i in range(5):
        y = lo + (hi - lo) * i / 4
        out.append(f'<line x1="{PAD_L}" x2="{W - PAD_R}" y1="{py(y):.1f}" y2="{py(y):.1f}" class="grid"/>'
                   f'<text x="{PAD_L - 6}" y="{py(y) + 4:.1f}" text-anchor="end">{_e(fmt_y(y))}</text>')
    if px is not None:
        step = max(1, math.ceil((x1 - x0) / 12))
        for x in range(x0, x1 + 1, step):
            out.append(f'<text x="{px(x):.1f}" y="{H - PAD_B + 16}" text-anchor="middle">{x}</text>')
        out.append(f'<text x="{(PAD_L + W - PAD_R) / 2}" y="{H - 6}" text-anchor="middle" class="label">{_e(x_label)}</text>')
    out.append(f'<text x="14" y="{(PAD_T + H - PAD_B) / 2}" text-anchor="middle" class="label" '
               f'transform="rotate(-90 14 {(PAD_T + H - PAD_B) / 2})">{_e(y_label)}</text>')
    return "".join(out)


def _legend(items: list[tuple[str, str, bool]]) -> str:
    """Swatches in rows above the plot, wrapping at the chart's width."""
    out, x, y = [], PAD_L, 8
    for name, color, faint in items:
        width = 28 + 6.5 * len(name)
        if x + width > W - PAD_R and x > PAD_L:
            x, y = PAD_L, y + 16
        opacity = ' opacity="0.45"' if faint else ""
        out.append(f'<rect x="{x:.0f}" y="{y}" width="12" height="12" fill="{color}"{opacity}/>'
                   f'<text x="{x + 16:.0f}" y="{y + 10}">{_e(name)}</text>')
        x += width
    return "".join(out)


def _svg(parts: list[str], title: str) -> Markup:
    return Markup(f'<svg class="chart" viewBox="0 0 {W} {H}" role="img" xmlns="http://www.w3.org/2000/svg">'
                  f'<title>{_e(title)}</title>{"".join(parts)}</svg>')


def _nice_ceiling(x: float) -> float:
    """The smallest 1, 2, 2.5 or 5 times a power of ten at or above x."""
    if x <= 0:
        return 1.0
    p = 10 ** math.floor(math.log10(x))
    return next(m * p for m in (1, 2, 2.5, 5, 10) if m * p >= x - 1e-12)


# ---------------------------------------------------------------- rendering

def render(page: str, **context) -> str:
    """Render report.html.j2 as the "run" or the "bench" page."""
    return environment(html=True).get_template("report.html.j2").render(
        page=page, code_css=Markup(HtmlFormatter(style="default").get_style_defs(".hl")),
        generated=time.strftime("%Y-%m-%d %H:%M:%S"), **context)


def _highlight(text: str, lexer) -> str:
    return highlight(text, lexer, HtmlFormatter(nowrap=True))


def _python_html(src: str) -> str:
    return _highlight(src, PythonLexer())


def _bottleneck_text(b: dict) -> str | None:
    for key in ("summary", "label", "kind", "bound"):
        if isinstance(b.get(key), str):
            return b[key]
    return None


def _e(text: str) -> str:
    return html.escape(str(text), quote=True)
