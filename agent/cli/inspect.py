"""`krefine inspect RUN_DIR [--iteration N] [--candidate ID]`: a run in the terminal.

Without options: the outcome, the rounds table and the candidate lineage tree (parent ->
children, each with its verdict, speedups and why it failed). `--iteration N`: that
round's candidates. `--candidate ID`: its prompt, completion, verdict, the feedback its
prompt carried (its parent's), the feedback it got, and its diff against its parent.
Candidates the model did not write are labelled (`origin_label`): the Inductor seed, and
sweep variants with the launch constants they changed from their parent.
Reads through agent/loop/runstats.py only; writes nothing.
"""
from __future__ import annotations

from rich.console import Console, Group
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from agent.loop.runstats import (BASELINES, EVAL_NODES, Candidate, RunSnapshot, children, diff_to_parent, fmt_speedup,
                            judged_text, load_run, no_best_line, rounds_table, run_judged)

VERDICT_STYLE = {"correct": "bold green", "incorrect": "red", "compile_error": "yellow",
                 "runtime_error": "magenta", "timeout": "blue", "rejected": "bold red",
                 "pending": "dim"}


def main(args) -> int:
    run = load_run(args.run_dir)
    console = Console()
    if args.candidate:
        show_candidate(console, run, run.candidate(args.candidate))
    elif args.iteration is not None:
        show_round(console, run, args.iteration)
    else:
        show_run(console, run)
    return 0


def show_run(console: Console, run: RunSnapshot) -> None:
    console.print(outcome(run))
    console.print(rounds(run))
    console.print(lineage(run))


def outcome(run: RunSnapshot) -> Panel:
    s = run.summary
    lines = Text()
    lines.append(f"{run.name}", style="bold")
    lines.append(f"  model {run.meta.get('model', '?')}  device {run.meta.get('device', '?')}\n")
    if s is None:
        lines.append("no summary.json: the run is still going or was interrupted (krefine resume)", style="yellow")
    else:
        lines.append("solved" if s.get("solved") else "not solved", style="bold green" if s.get("solved") else "bold red")
        if s.get("solved") and not s.get("timed", True):
            lines.append(" (correct; nothing is timed on cpu)")
        lines.append(f"  stop: {s.get('stop_reason')}  candidates: {judged_text(run_judged(run))}"
                     f"  rounds: {s.get('rounds')}\n")
        best = s.get("best")
        if best:
            sp = best.get("speedup") or {}
            lines.append(f"best {best['candidate']}: " + (
                f"{fmt_speedup(sp.get('eager'))} vs eager, {fmt_speedup(sp.get('compile'))} vs torch.compile"
                if any(v is not None for v in sp.values()) else "correct, not timed (cpu)"))
        else:
            lines.append(no_best_line(s))
        spent = s.get("budget_spent") or {}
        if spent:
            lines.append("\nspent: " + ", ".join(f"{k} {_num(v)}" for k, v in spent.items()))
    return Panel(lines, title=f"run {run.dir.run_id}", expand=False)


def rounds(run: RunSnapshot) -> Table:
    t = Table(title="rounds (speedups: vs eager / vs torch.compile)", box=None, pad_edge=False, header_style="bold underline")
    for col in ("round", "cands", "verdicts", "best", "so far", "tokens", "wall s"):
        t.add_column(col, justify="left" if col == "verdicts" else "right", no_wrap=True)
    for row in rounds_table(run):
        mix = Text("\n").join(Text(f"{n} {status}", style=VERDICT_STYLE.get(status, ""))
                              for status, n in row.verdicts.items())
        t.add_row(str(row.round), str(row.candidates), mix,
                  " / ".join(fmt_speedup(row.best[b]) for b in BASELINES),
                  " / ".join(fmt_speedup(row.best_so_far[b]) for b in BASELINES),
                  str(row.tokens), _num(row.wall_s))
    return t


def origin_label(run: RunSnapshot, c: Candidate) -> str:
    """"Inductor seed", "sweep: XBLOCK 1024->2048" (what it changed from its parent), or
    "" for a model-written candidate."""
    if c.origin == "inductor_seed":
        return "Inductor seed"
    if c.origin != "sweep":
        return ""
    return f"sweep: {c.change}" if c.change else "sweep"


def lineage(run: RunSnapshot) -> Tree:
    tree = Tree(Text("lineage (parent → children)", style="bold"))
    kids = children(run)
    def add(node: Tree, cid: str) -> None:
        branch = node.add(label(run, run.candidates[cid]))
        for child in kids.get(cid, []):
            add(branch, child)
    for root in kids.get(None, []):
        add(tree, root)
    return tree


def label(run: RunSnapshot, c: Candidate) -> Text:
    """The candidate's verdict in `krefine run`'s words (Candidate.words), its origin after."""
    t = Text(f"{c.id} ", style="bold")
    t.append(c.status, style=VERDICT_STYLE.get(c.status, ""))
    t.append(c.words.removeprefix(c.status))
    if origin_label(run, c):
        t.append(f"  [{origin_label(run, c)}]", style="cyan")
    if c.id == run.best_id:
        t.append("  ★ best", style="bold green")
    return t


def show_round(console: Console, run: RunSnapshot, round_: int) -> None:
    t = Table(title=f"round {round_}", box=None, pad_edge=False, header_style="bold underline")
    for col in ("candidate", "parent", "origin", "verdict", "eager", "compile", "tokens"):
        t.add_column(col, no_wrap=True)
    t.add_column("why / feedback", ratio=1)
    for c in run.round_candidates(round_):
        t.add_row(c.id, c.parent or "—", {"inductor_seed": "seed"}.get(c.origin, c.origin),
                  Text(c.status, style=VERDICT_STYLE.get(c.status, "")),
                  fmt_speedup(c.speedup["eager"]), fmt_speedup(c.speedup["compile"]),
                  str(c.prompt_tokens + c.completion_tokens),
                  Text(" · ".join(x for x in (origin_label(run, c) if c.origin == "sweep" else "",
                                               c.reason or c.feedback) if x)))
    console.print(t)


def show_candidate(console: Console, run: RunSnapshot, c: Candidate) -> None:
    v = c.verdict or {}
    head = Table.grid(padding=(0, 2))
    head.add_row("round", str(c.round))
    head.add_row("parent", c.parent or "— (first round)")
    head.add_row("origin", origin_label(run, c) or "model")
    head.add_row("verdict", Text(c.status, style=VERDICT_STYLE.get(c.status, "")))
    steps = [e for e in run.events if e.get("candidate") == c.id and e.get("node") in ("generate", *EVAL_NODES)]
    if steps:   # the candidate's path through the graph's nodes, as the trace has it
        head.add_row("path", " → ".join(e["node"] if e["node"] == "generate" else
                                        f"{e['node']} {e.get('status')} {e.get('duration_s') or 0:.2f}s" for e in steps))
    head.add_row("speedup", f"{fmt_speedup(c.speedup['eager'])} vs eager, {fmt_speedup(c.speedup['compile'])} vs torch.compile")
    for name, timing in (v.get("timing_ms") or {}).items():
        if timing:
            head.add_row(f"{name} ms", f"median {timing['median']:.4f}  spread {timing['spread']:.1%}  n {timing['n']}")
    if v.get("flags"):
        head.add_row("flags", ", ".join(v["flags"]))
    if v.get("bottleneck"):
        b = v["bottleneck"]
        head.add_row("profile", str(b.get("summary") or ", ".join(f"{k} {x}" for k, x in b.items())))
    head.add_row("tokens", f"{c.prompt_tokens} prompt, {c.completion_tokens} completion")
    console.print(Panel(head, title=f"candidate {c.id}", expand=False))

    parent = run.parent_of(c.id)
    sections = [
        ("prompt", run.text(run.dir.prompt(c.id))),
        ("completion", run.text(run.dir.completion(c.id))),
        ("diagnostics", "\n".join(_diagnostic(d) for d in v.get("diagnostics", [])) or None),
        (f"feedback received (from parent {parent.id}, carried in the prompt)" if parent else
         "feedback received", parent.feedback if parent else "none: a first-round candidate"),
        ("feedback on this candidate", c.feedback or None),
    ]
    for title, body in sections:
        console.print(Panel(Text(body) if body is not None else Text("(absent)", style="dim"),
                            title=title, title_align="left"))
    diff = diff_to_parent(run, c.id)
    if diff:
        body = Syntax(diff, "diff", theme="ansi_dark", word_wrap=True)
    elif not run.dir.candidate_src(c.id).exists():
        body = Text("no code was extracted from the completion", style="dim")
    else:
        body = Text("no parent: a first-round candidate" if parent is None else "identical to its parent", style="dim")
    console.print(Panel(Group(body), title=f"diff against {parent.id if parent else 'parent'}", title_align="left"))


def _diagnostic(d: dict) -> str:
    where = f" line {d['line']}" if d.get("line") else ""
    src = f"\n    {d['source_line']}" if d.get("source_line") else ""
    return f"{d.get('kind')}{where}: {d.get('message')}{src}"


def _num(x) -> str:
    if x is None:
        return "—"
    return f"{x:.1f}" if isinstance(x, float) else str(x)
