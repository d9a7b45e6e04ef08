"""Code extraction: the candidate module's source out of a raw model completion.

Copes with what KernelLLM and similar models actually emit: several fenced blocks
(the one defining ModelNew wins, else the longest Python one), a missing opening or
closing fence, prose before, between and after the code, raw code with no fences at
all, and special tokens (`<|eot_id|>` and friends; anything after an end-of-turn
token is dropped). Does not check that the code compiles: the evaluator does.
"""
from __future__ import annotations

import ast
import re
import textwrap

# generation ends at the first of these; any other <|...|> token is removed
_END_TOKENS = ("<|eot_id|>", "<|end_of_text|>", "<|eom_id|>", "</s>", "<|im_end|>", "<|endoftext|>")
_SPECIAL = re.compile(r"<\|[A-Za-z0-9_]+\|>")
_FENCE = re.compile(r"^[ \t]*(?:```|~~~)[ \t]*([\w+.#-]*)[^\n`]*$")
_PYTHON_TAGS = {"", "python", "py", "python3", "triton"}
_MODEL_NEW = re.compile(r"^class\s+ModelNew\b", re.M)
_CODE_LINE = re.compile(r"^\s*(import\s+\w|from\s+[\w.]+\s+import\s|def\s+\w|class\s+\w|@\w)")
# a line that starts like Python even when it does not parse on its own
_CODE_START = re.compile(r"^(import|from|class|def|async|if|elif|else|for|while|with|try|except|"
                         r"finally|return|raise|assert|print|del|pass|global|lambda)\b|^[@#)\]}'\"]")
_PROSE = re.compile(r"^(?:\d+\.|[-*])?\s*[A-Za-z][^=(){}\[\]]*\s[A-Za-z`]")


def extract_candidate(completion: str) -> str | None:
    """The candidate module in `completion` as it is judged and taken away (portable)."""
    from tools.dialect.portable import portable
    code = extract_code(completion)
    return portable(code) if code is not None else None


def extract_code(completion: str) -> str | None:
    """The candidate module source in `completion`, ending in a newline; None when
    nothing in it looks like Python code."""
    # 1) end of turn, special tokens
    text = completion
    for end in _END_TOKENS:
        text = text.split(end, 1)[0]
    text = _SPECIAL.sub("", text).replace("\r\n", "\n")
    # 2) segments between fence lines; a segment's tag is that of the fence opening it
    segments: list[tuple[str, list[str]]] = [("", [])]
    for line in text.split("\n"):
        m = _FENCE.match(line)
        if m:
            segments.append((m.group(1).lower(), []))
        else:
            segments[-1][1].append(line)
    # 3) the code-like ones, ranked: defines ModelNew, tagged as Python, parses, length
    best, best_rank = None, None
    for tag, lines in segments:
        code = _trim_prose(textwrap.dedent("\n".join(lines)))
        if not code or not any(_CODE_LINE.match(ln) for ln in code.split("\n")):
            continue
        rank = (bool(_MODEL_NEW.search(code)), tag in _PYTHON_TAGS, _parses(code), len(code))
        if best_rank is None or rank > best_rank:
            best, best_rank = code, rank
    return best + "\n" if best is not None else None


def _trim_prose(code: str) -> str:
    """Drop blank and prose lines from both ends (prose in the middle stays: the
    evaluator's syntax error then says where)."""
    lines = code.split("\n")
    while lines and (not lines[0].strip() or _is_prose(lines[0])):
        lines.pop(0)
    while lines and (not lines[-1].strip() or _is_prose(lines[-1])):
        lines.pop()
    return "\n".join(lines).rstrip()


def _is_prose(line: str) -> bool:
    if line[:1].isspace() or _CODE_START.match(line) or not _PROSE.match(line):
        return False
    return not _parses(line)


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):   # deep nesting: not code we can use
        return False
    return True
