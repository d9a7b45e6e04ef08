"""The feedback a verdict carries (`Verdict.feedback`): what the next refinement prompt
tells the model, and what `krefine eval`, `krefine inspect` and the report show.

One renderer: `feedback_sections` digests the Verdict's own fields into plain values
and renders them through prompts/partials/feedback.j2, most important section first
(the status line, the errors, the numeric check, the traceback, the timing, the
profile, the kernels, the flags). `feedback_for` joins them; the judge stores that text
in the verdict, and agent/loop/prompting.py renders the same sections, dropping the least
important ones (and cutting the first that does not fit) only when the prompt's
feedback token budget is smaller.
"""
from __future__ import annotations

import math
import re
from typing import Any

from tools.templates import environment
from tools.verdict import Status, Verdict

SEPARATOR = "\n\n"
# checks keys that say nothing the model can act on (seeds are also secret by design)
_NOISY_CHECKS = ("seed", "phase_s", "sandbox", "worker_output", "traceback", "timing", "error",
                 "time_shares", "kernel_breakdown", "host_check", "gpu_healthy")


def feedback_for(v: Verdict) -> str:
    """The verdict's whole feedback: every section, in order."""
    return SEPARATOR.join(feedback_sections(v))


def _partial():
    """prompts/partials/feedback.j2's macros (the template is read once per process)."""
    return environment().get_template("partials/feedback.j2").module


def cut_marker(n_lines: int) -> str:
    return str(_partial().cut(n_lines))


def feedback_sections(v: Verdict) -> list[str]:
    """The feedback's sections, most important first (the status line first, always);
    none holds a blank line, so "\n\n" joins and splits them."""
    m = _partial()
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
    # nothing structured: a summary set by hand (an older verdict's), unless it is this text
    if len(out) == 1 and v.feedback.strip() and v.feedback.strip() != out[0].strip():
        out.append(str(m.summary(v.feedback.strip())))
    return [re.sub(r"\n\s*\n", "\n", s) for s in out]


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


