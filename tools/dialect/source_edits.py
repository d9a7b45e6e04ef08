"""Edits of a Python source by AST position, every other byte kept: `Edits`.

tools/dialect/portable.py records what to change while it walks a candidate's tree (a
span replaced, whole statements deleted, a `with` block unwrapped, lines inserted) and
applies it once. Positions are the AST's (1-based lines, UTF-8 byte columns), turned into
character columns here. Not covered: overlapping edits beyond a replacement inside an
earlier one (dropped: the outer text already holds it).
"""
from __future__ import annotations

import ast


class Edits:
    """Edits of the source text by AST position: span replacements, whole statements
    deleted, a `with` block unwrapped (its header gone, its body dedented), lines inserted."""

    def __init__(self, source: str):
        self.lines = source.splitlines(keepends=True)
        self.spans: list[tuple[int, int, int, int, str]] = []   # (line, col, end_line, end_col, text), 0-based
        self.deleted: set[int] = set()
        self.dedent: dict[int, int] = {}
        self.after: dict[int, list[str]] = {}
        self.inserts: list[tuple[int, str]] = []

    def empty(self) -> bool:
        return not (self.spans or self.deleted or self.dedent or self.after)

    def _col(self, line: int, byte_col: int) -> int:
        return len(self.lines[line].encode("utf-8")[:byte_col].decode("utf-8", "replace"))

    def _span(self, node) -> tuple[int, int, int, int]:
        l0, l1 = node.lineno - 1, node.end_lineno - 1
        return l0, self._col(l0, node.col_offset), l1, self._col(l1, node.end_col_offset)

    def covers(self, node) -> bool:
        l0, c0, l1, c1 = self._span(node)
        return any((s[0], s[1]) <= (l0, c0) and (l1, c1) <= (s[2], s[3]) for s in self.spans) \
            or any(line in self.deleted for line in range(l0, l1 + 1))

    def text_of(self, node) -> str:
        l0, c0, l1, c1 = self._span(node)
        if l0 == l1:
            return self.lines[l0][c0:c1]
        return self.lines[l0][c0:] + "".join(self.lines[l0 + 1:l1]) + self.lines[l1][:c1]

    def replace(self, node, text: str) -> None:
        span = self._span(node)
        # a replacement inside an earlier one is dropped (the outer text already holds it)
        self.spans = [s for s in self.spans if not ((span[0], span[1]) <= (s[0], s[1]) and (s[2], s[3]) <= (span[2], span[3]))]
        if not self.covers(node):
            self.spans.append((*span, text))

    def delete(self, stmt: ast.stmt) -> None:
        self.deleted.update(range(stmt.lineno - 1, stmt.end_lineno))

    def unwrap(self, stmt: ast.With) -> None:
        self.deleted.update(range(stmt.lineno - 1, stmt.body[0].lineno - 1))
        by = stmt.body[0].col_offset - stmt.col_offset
        for line in range(stmt.body[0].lineno - 1, stmt.end_lineno):
            self.dedent[line] = self.dedent.get(line, 0) + by

    def append_after(self, stmt: ast.stmt, text: str) -> None:
        indent = self.lines[stmt.lineno - 1][:len(self.lines[stmt.lineno - 1]) - len(self.lines[stmt.lineno - 1].lstrip())]
        self.after.setdefault(stmt.end_lineno - 1, []).append(indent + text + "\n")

    def insert(self, before_line: int, text: str) -> None:
        self.inserts.append((before_line - 1, text))

    def apply(self) -> str:
        lines = list(self.lines)
        if lines and not lines[-1].endswith("\n"):
            lines[-1] += "\n"
        # 1) spans, right to left (multi-line spans join their lines into the first)
        for l0, c0, l1, c1, text in sorted(self.spans, reverse=True):
            head, tail = lines[l0][:c0], lines[l1][c1:]
            lines[l0] = head + text + tail
            for line in range(l0 + 1, l1 + 1):
                lines[line] = ""
        # 2) dedent, delete, lines after statements, the definitions block
        out = []
        for i, line in enumerate(lines):
            for text in [t for before, t in self.inserts if before == i]:
                out.append(text + "\n")
            if i in self.deleted:
                continue
            by = self.dedent.get(i, 0)
            if by and line[:by].strip() == "":
                line = line[by:]
            out.append(line)
            out.extend(self.after.get(i, []))
        for text in [t for before, t in self.inserts if before >= len(lines)]:
            out.append(text)
        return "".join(out)
