"""Prompt rendering: KernelLLM's trained first turn and the refinement turns.

All prompt text lives in prompts/*.j2, rendered through the one Jinja environment
below (StrictUndefined: a missing value is an error, not an empty string). The
feedback's sections are the verdict's own (tools/judge/feedback.py renders them, and
the verdict stores them joined as `Verdict.feedback`); this file decides what fits: the
feedback is cut to `feedback_token_budget` tokens, least important sections first, and
the whole prompt to `max_prompt_tokens` (the in-context example goes before any
feedback). The original module and the parent candidate are never cut.

Does not call a model or count tokens itself: the caller passes the backend's
`count_tokens`.
"""
from __future__ import annotations

from typing import Callable, Sequence

from agent.config import PromptConfig
from agent.search.sweep import launch_constants
from tools.judge.feedback import SEPARATOR, cut_marker, feedback_sections
from tools.templates import environment
from tools.verdict import Verdict

_ENV = environment()
_LONG_LINE_CHARS = 240            # longer lines are split before cutting, so one huge line can be cut too

CountTokens = Callable[[str], int]


def render_initial(problem_src: str) -> str:
    """KernelLLM's first turn for `problem_src`: kernelllm.py's PROMPT_TEMPLATE.format(src)."""
    return _ENV.get_template("initial.j2").render(code=problem_src)


def render_refine(problem_src: str, parent_src: str, verdict: Verdict, config: PromptConfig,
                  count_tokens: CountTokens, facts: Sequence[str] = ()) -> str:
    """A refinement turn: the module, the parent candidate and its fitted feedback
    (`facts`, from `search_facts`, follow the verdict's own sections)."""
    def render(feedback: str, include_example: bool) -> str:
        return _ENV.get_template("refine.j2").render(
            code=problem_src, parent=parent_src.rstrip("\n"), feedback=feedback,
            include_example=include_example)

    # 1) with the example, if it fits next to the feedback cut only to its own budget
    if config.include_example:
        prompt = render(render_feedback(verdict, config.feedback_token_budget, count_tokens, facts), True)
        if count_tokens(prompt) <= config.max_prompt_tokens:
            return prompt
    # 2) without it: the example is worth less than any of the feedback
    budget = min(config.feedback_token_budget,
                 config.max_prompt_tokens - count_tokens(render("", False)))
    return render(render_feedback(verdict, max(budget, 0), count_tokens, facts), False)


def render_feedback(verdict: Verdict, token_budget: int, count_tokens: CountTokens,
                    facts: Sequence[str] = ()) -> str:
    """The feedback block of a refinement prompt, at most `token_budget` tokens.

    Sections go in by importance; the first that does not fit is cut to the space left
    and the rest are dropped. The status line is always kept, whatever the budget.
    """
    parts: list[str] = []
    sections = feedback_sections(verdict)   # the verdict's own feedback, whole, then the search's facts
    if facts:
        sections.append(str(_ENV.get_template("partials/feedback.j2").module.facts(list(facts))))
    for i, text in enumerate(sections):
        if i == 0 or _fits(parts + [text], token_budget, count_tokens):
            parts.append(text)
            continue
        cut = _cut_to_fit(text, lambda t: _fits(parts + [t], token_budget, count_tokens))
        if cut:
            parts.append(cut)
        break
    return SEPARATOR.join(parts)


def _fits(parts: list[str], budget: int, count_tokens: CountTokens) -> bool:
    return count_tokens(SEPARATOR.join(parts)) <= budget


# -- cutting one section to the space left -------------------------------------------

def _cut_to_fit(text: str, fits: Callable[[str], bool]) -> str | None:
    """The longest head + tail of `text`'s lines (a third head, two thirds tail: errors
    end with the line that matters) that fits, with a marker for the cut; None if even
    one line does not fit."""
    lines: list[str] = []
    for line in text.splitlines():
        while len(line) > _LONG_LINE_CHARS:
            lines.append(line[:_LONG_LINE_CHARS])
            line = "  " + line[_LONG_LINE_CHARS:]
        lines.append(line)

    def keep(k: int) -> str:
        head = max(min(k, 2), k // 3)  # the section's header and its first item
        tail = k - head
        return "\n".join([*lines[:head], cut_marker(len(lines) - k), *(lines[-tail:] if tail else [])])

    lo, hi = 1, len(lines) - 1          # keep(k) for k < len(lines)
    if hi < lo or not fits(keep(lo)):
        return None
    while lo < hi:                      # largest k with fits(keep(k))
        mid = (lo + hi + 1) // 2
        if fits(keep(mid)):
            lo = mid
        else:
            hi = mid - 1
    return keep(lo)


# -- what the search found -------------------------------------------------------------

def search_facts(source: str, verdict: Verdict | None, lineage: Sequence[str] = ()) -> list[str]:
    """The precision and launch facts of a parent the search made: how it was found
    (`lineage`: the portfolio entry and sweep moves, oldest first), its `tl.dot`
    precisions (the verdict's `dot_precision` check) and each kernel's launch constants."""
    facts = []
    if lineage:
        facts.append("found by: " + " -> ".join(lineage))
    dots = (verdict.checks.get("dot_precision") if verdict is not None else None) or {}
    if dots:
        used = ", ".join(f"{p} x {n}" for p, n in sorted(dots.items()))
        facts.append(f"tl.dot precision: {used}. {_precision_note(set(dots))}")
    for kernel, constants in launch_constants(source):
        facts.append(f"launch {kernel}: " + ", ".join(f"{n}={v}" for n, v in constants))
    return facts


def lineage(candidates: dict, cid: str) -> list[str]:
    """The changes that made `cid` from the seed, oldest first (portfolio entry, sweep moves)."""
    changes: list[str] = []
    seen: set[str] = set()
    while cid in candidates and cid not in seen:
        seen.add(cid)
        record = candidates[cid]
        if record.get("change"):
            changes.append(str(record["change"]))
        cid = record.get("parent")
    return changes[::-1]


def _precision_note(used: set[str]) -> str:
    if "ieee" in used:
        return ('"ieee" is exact fp32 on the CUDA cores (slow); input_precision="tf32x3" (three TF32 '
                "tensor-core products, about fp32 accuracy) is usually 2-5x faster: the judge's "
                "tolerance, not the name, decides whether it is accurate enough.")
    if "tf32x3" in used:
        return ('"tf32x3" is three TF32 tensor-core products, about fp32 accuracy; it was judged '
                "within the tolerance: keep it.")
    if used & {"tf32", "default"}:
        return ("a single TF32 product (also what tl.dot does with fp32 operands by default) "
                'has ~1e-3 error and usually fails the fp32 tolerance; "tf32x3" does not.')
    return ""
