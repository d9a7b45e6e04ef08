"""The documentation's shape (issue 48): README and BENCHMARKS.md within their sizes,
benchmarks/ small and indexed, and every relative link in README.md, BENCHMARKS.md and
docs/*.md naming a file that exists. Reads text only: no torch, no krefine import."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\]\(([^)\s]+)\)")
DOCS = [ROOT / "README.md", ROOT / "BENCHMARKS.md", *sorted((ROOT / "docs").glob("*.md"))]


def _links(path: Path) -> list[str]:
    """Markdown link targets outside code fences and inline code."""
    out, fence = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            fence = not fence
            continue
        if not fence:
            out += LINK.findall(re.sub(r"`[^`]*`", "", line))
    return out


def test_readme_is_at_most_400_lines():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 400


def test_benchmarks_md_is_at_most_600_lines():
    assert len((ROOT / "BENCHMARKS.md").read_text().splitlines()) <= 600


def test_benchmarks_dir_has_at_most_20_entries():
    entries = [p.name for p in (ROOT / "benchmarks").iterdir() if p.name != "__pycache__"]
    assert len(entries) <= 20, sorted(entries)


def test_every_benchmarks_entry_is_named_in_its_readme():
    index = (ROOT / "benchmarks" / "README.md").read_text()
    missing = [p.name for p in (ROOT / "benchmarks").iterdir()
               if p.name != "__pycache__" and f"`{p.name}{'/' if p.is_dir() else ''}`" not in index]
    assert not missing, f"benchmarks/README.md does not name {missing}"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_names_an_existing_file(doc):
    broken = [t for t in _links(doc)
              if not re.match(r"[a-z]+:", t) and not t.startswith("#")
              and not (doc.parent / t.split("#")[0]).exists()]
    assert not broken, f"{doc.relative_to(ROOT)}: {broken}"
