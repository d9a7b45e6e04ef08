"""Prompt rendering: KernelLLM's trained first turn and the refinement turns.

All prompt text lives in prompts/*.j2, rendered through the one Jinja environment
below (StrictUndefined: a missing value is an error, not an empty string). This file
only digests a Verdict into plain values and decides what fits: the refinement
feedback is cut to `feedback_token_budget` tokens, least important sections first,
and the whole prompt to `max_prompt_tokens` (the in-context example goes before any
feedback). The original module and the parent candidate are never cut.

Does not call a model or count tokens itself: the caller passes the backend's
`count_tokens`.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import jinja2

from agent import PROMPTS_DIR
from agent.config import PromptConfig
from tools.verdict import Status, Verdict

_ENV = jinja2.Environment(
    loader=jinja2.FileSystemLoader(str(PROMPTS_DIR)),
    undefined=jinja2.StrictUndefined,
    keep_trailing_newline=True,   # the trained template ends in "\n": keep it byte for byte
    autoescape=False,
)
_LONG_LINE_CHARS = 240            # longer lines are split before cutting, so one huge line can be cut too
_SEPARATOR = "\n\n"
# checks keys that say nothing the model can act on (seeds are also secret by design)
_NOISY_CHECKS = ("seed", "phase_s", "sandbox", "worker_output", "traceback", "timing", "error",
                 "time_shares", "kernel_breakdown", "host_check", "gpu_healthy")

CountTokens = Callable[[str], int]


def render_initial(problem_src: str) -> str:
    """KernelLLM's first turn for `problem_src`: kernelllm.py's PROMPT_TEMPLATE.format(src)."""
    return _ENV.get_template("initial.j2").render(code=problem_src)


def render_refine(problem_src: str, parent_src: str, verdict: Verdict, config: PromptConfig,
                  count_tokens: CountTokens) -> str:
    """A refinement turn: the module, the parent candidate and its fitted feedback."""
    def render(feedback: str, include_example: bool) -> str:
        return _ENV.get_template("refine.j2").render(
            code=problem_src, parent=parent_src.rstrip("\n"), feedback=feedback,
            include_example=include_example)

    # 1) with the example, if it fits next to the feedback cut only to its own budget
    if config.include_example:
        prompt = render(render_feedback(verdict, config.feedback_token_budget, count_tokens), True)
        if count_tokens(prompt) <= config.max_prompt_tokens:
            return prompt
    # 2) without it: the example is worth less than any of the feedback
    budget = min(config.feedback_token_budget,
                 config.max_prompt_tokens - count_tokens(render("", False)))
    return render(render_feedback(verdict, max(budget, 0), count_tokens), False)


def render_feedback(verdict: Verdict, token_budget: int, count_tokens: CountTokens) -> str:
    """The feedback block of a refinement prompt, at most `token_budget` tokens.

    Sections go in by importance; the first that does not fit is cut to the space left
    and the rest are dropped. The status line is always kept, whatever the budget.
    """
    parts: list[str] = []
    for i, text in enumerate(_sections(verdict)):
        if i == 0 or _fits(parts + [text], token_budget, count_tokens):
            parts.append(text)
            continue
        cut = _cut_to_fit(text, lambda t: _fits(parts + [t], token_budget, count_tokens))
        if cut:
            parts.append(cut)
        break
    return _SEPARATOR.join(parts)


def _fits(parts: list[str], budget: int, count_tokens: CountTokens) -> bool:
    return count_tokens(_SEPARATOR.join(parts)) <= budget


# -- the Verdict, digested into the plain values prompts/partials/feedback.j2 takes ------

def _sections(v: Verdict) -> list[str]:
    """Rendered feedback sections, most important first (status first, always)."""
    m = _ENV.get_template("partials/feedback.j2").module
    out = [str(m.status(v.status.value))]
    if v.diagnostics:
        out.append(str(m.diagnostics([_diagnostic(d) for d in v.diagnostics])))
    if v.status is Status.INCORRECT and (items := _numeric(v.checks)):
        out.append(str(m.numeric(items)))
    if isinstance(tb := v.checks.get("traceback"), str) and tb.strip():
        out.append(str(m.traceback(tb.strip().splitlines())))
    if (t := _timing(v)) is not None:
        out.append(str(m.timing(t)))
    if v.bottleneck:
        out.append(str(m.bottleneck(_bottleneck(v.bottleneck))))
    if v.kernels:
        out.append(str(m.kernels(_kernels(v.kernels))))
    if v.flags:
        out.append(str(m.flags(list(v.flags))))
    if len(out) == 1 and v.feedback.strip():   # nothing structured: the evaluator's own summary
        out.append(str(m.summary(v.feedback.strip())))
    return out


def _diagnostic(d) -> dict[str, Any]:
    return {"kind": d.kind, "line": d.line, "source_line": d.source_line,
            "message": "\n  ".join(d.message.strip().splitlines())}


def _numeric(checks: dict) -> list[tuple[str, str]]:
    """The failing comparison's figures (else the last one's) and the tolerance; without
    comparisons, whatever checks hold that the model could act on."""
    comparisons = [c for c in checks.get("comparisons") or [] if isinstance(c, dict)]
    if not comparisons:
        return _flatten({k: v for k, v in checks.items() if not any(n in k for n in _NOISY_CHECKS)})
    failing = next((c for c in comparisons if c.get("ok") is False), comparisons[-1])
    return _flatten({k: v for k, v in failing.items() if k != "ok"}) + \
        _flatten({"tolerance": checks.get("tolerance")})


def _timing(v: Verdict) -> dict[str, str | None] | None:
    medians = {k: (t.median_ms if t is not None else None) for k, t in (v.timing or {}).items()}
    if all(x is None for x in (*medians.values(), v.speedup_eager, v.speedup_compile)):
        return None
    return {"candidate": _num(medians.get("candidate")), "eager": _num(medians.get("eager")),
            "compile": _num(medians.get("compile")),
            "speedup_eager": _num(v.speedup_eager, 3), "speedup_compile": _num(v.speedup_compile, 3)}


def _bottleneck(b: dict) -> list[tuple[str, str | list[str]]]:
    """Whatever the profiler reported: class and summary first, lists kept as lists."""
    order = sorted(b, key=lambda k: ({"class": 0, "summary": 1, "evidence": 2, "hints": 3}.get(k, 4)))
    items: list[tuple[str, str | list[str]]] = []
    for key in order:
        value = b[key]
        if value is None or value == [] or value == {}:
            continue
        if isinstance(value, (list, tuple)):
            items.append((key, [_text(x) for x in value]))
        elif isinstance(value, dict):
            items.extend((f"{key}.{k}", x) for k, x in _flatten(value))
        else:
            items.append((key, _text(value)))
    return items


def _kernels(kernels: tuple[dict, ...]) -> list[tuple[str, str]]:
    rows = []
    for i, k in enumerate(kernels):
        name = str(k.get("name", f"kernel {i}"))
        figures = ", ".join(f"{key} {val}" for key, val in _flatten({x: y for x, y in k.items() if x != "name"}))
        rows.append((name, figures))
    return rows


def _flatten(d: dict, prefix: str = "") -> list[tuple[str, str]]:
    items = []
    for key, value in d.items():
        name = f"{prefix}{key}"
        if value is None:
            continue
        if isinstance(value, dict):
            items.extend(_flatten(value, f"{name}."))
        else:
            items.append((name, _text(value)))
    return items


def _text(value: Any) -> str:
    if isinstance(value, float):
        return _num(value)
    if isinstance(value, (list, tuple)):
        shown = ", ".join(_text(x) for x in value[:8])
        return f"[{shown}{', ...' if len(value) > 8 else ''}]" + (f" ({len(value)} items)" if len(value) > 8 else "")
    return str(value)


def _num(x: float | None, digits: int = 4) -> str | None:
    if x is None:
        return None
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return f"{x:.{digits}g}"


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
    cut = _ENV.get_template("partials/feedback.j2").module.cut

    def keep(k: int) -> str:
        head = max(min(k, 2), k // 3)  # the section's header and its first item
        tail = k - head
        return "\n".join([*lines[:head], str(cut(len(lines) - k)), *(lines[-tail:] if tail else [])])

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
