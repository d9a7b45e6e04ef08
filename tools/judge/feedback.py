"""The short feedback text a verdict carries (`Verdict.feedback`), for people and for
the refinement prompt: what went wrong first, where, and what to do about it.

Built only from the verdict's own fields; the prompt templates decide how it is shown.
"""
from __future__ import annotations

from tools.verdict import Status, Verdict

_LEAD = {
    Status.CORRECT: "Correct.",
    Status.INCORRECT: "Wrong output.",
    Status.COMPILE_ERROR: "Does not compile.",
    Status.RUNTIME_ERROR: "Crashed while running.",
    Status.TIMEOUT: "Timed out.",
    Status.REJECTED: "Rejected by a guard.",
}


# short forwards are timed without launch and sync overhead (tools/perf/timer.py)
_MEASURE = {"cuda_graph": "CUDA-graph replays", "batched": "back-to-back calls"}


def feedback_for(v: Verdict, max_chars: int = 1200) -> str:
    lines = [_LEAD[v.status]]
    for d in v.diagnostics[:3]:
        where = f" (line {d.line}: `{d.source_line}`)" if d.line and d.source_line else \
            (f" (line {d.line})" if d.line else "")
        lines.append(f"- {d.message.strip()}{where}")
    cand = v.timing.get("candidate") if v.timing else None
    if v.correct and cand is not None:
        measure = v.checks.get("timing_measure")
        parts = [f"{cand.median_ms:.4f} ms" + (f" per call in {_MEASURE[measure]}" if measure in _MEASURE else "")]
        if v.speedup_eager is not None:
            parts.append(f"{v.speedup_eager:.2f}x vs eager")
        if v.speedup_compile is not None:
            parts.append(f"{v.speedup_compile:.2f}x vs torch.compile")
        lines.append("Timing: " + ", ".join(parts) + ".")
    if v.bottleneck and v.bottleneck.get("summary"):
        lines.append(str(v.bottleneck["summary"]))
    flags = [f for f in v.flags if not f.startswith("diff:")]
    if flags:
        lines.append("Flags: " + ", ".join(flags) + ".")
    text = "\n".join(lines)
    return text if len(text) <= max_chars else text[: max_chars - 3] + "..."
