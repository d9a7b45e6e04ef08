"""prompts/ and the Jinja environments that render its templates, defined once.

`environment()` is the text one: the refinement prompts (agent/loop/prompting.py) and a
verdict's feedback (tools/judge/feedback.py). It escapes nothing and keeps a template's
trailing newline, so the trained template's text comes out byte for byte.
`environment(html=True)` is the run report's (agent/cli/report.py): autoescaped, block
tags trimmed. Both are strict: a value a template names but nobody passed is an error,
not an empty string. Each is built once per process and shares its template cache with
every user. jinja2 is imported on first use, not with this module.
"""
from __future__ import annotations

import functools
from pathlib import Path

PROMPTS_DIR = Path(__file__).resolve().parents[1] / "prompts"


def environment(*, html: bool = False):
    """The process's jinja2.Environment over PROMPTS_DIR: text (default) or HTML."""
    return _environment(html)


@functools.cache
def _environment(html: bool):
    import jinja2
    loader = jinja2.FileSystemLoader(str(PROMPTS_DIR))
    if html:
        return jinja2.Environment(loader=loader, autoescape=True, undefined=jinja2.StrictUndefined,
                                  trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    return jinja2.Environment(loader=loader, undefined=jinja2.StrictUndefined,
                              keep_trailing_newline=True, autoescape=False)
