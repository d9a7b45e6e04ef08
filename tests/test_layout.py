"""The shape of tools/ and agent/: small modules in both, no import circles in either,
nothing of the agent's in tools/.

Reads the source only (ast), never imports it. An import counts wherever it stands,
at module level or inside a function (a lazy import that closes a circle is still a
circle). `from tools.x import name` imports tools.x, or tools.x.name when that is a
module; a package import (`import tools.judge`, `from tools.judge import Judge`)
imports the package's __init__.py.
"""
from __future__ import annotations

import ast
from pathlib import Path

TOOLS = Path(__file__).resolve().parent.parent / "tools"
AGENT = TOOLS.parent / "agent"
MAX_LINES = 430


def _modules(root: Path = TOOLS) -> dict[str, Path]:
    """Dotted module name -> file, for every module under `root` (packages by __init__)."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _circle_in(root: Path) -> list[str] | None:
    modules = _modules(root)
    return _cycle({name: _imported(path, name, modules) for name, path in modules.items()})


def _imported(path: Path, name: str, modules: dict[str, Path]) -> set[str]:
    """The tools modules `name` (at `path`) imports, module level and function level."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:   # relative: against this module's package
                up = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            subs = [f"{base}.{a.name}" for a in node.names]
            targets = [s if s in modules else base for s in subs]
        else:
            continue
        for t in targets:
            while t and t not in modules:   # `import tools.a.b`: the longest module prefix
                t = t.rpartition(".")[0]
            if t:
                found.add(t)
    return found - {name}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle as [a, b, ..., a], or None (iterative depth-first search)."""
    state: dict[str, int] = {}   # 1 on the current path, 2 done
    for root in sorted(graph):
        if state.get(root):
            continue
        path, todo = [root], [iter(sorted(graph[root]))]
        state[root] = 1
        while todo:
            nxt = next(todo[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                todo.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            elif not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                todo.append(iter(sorted(graph[nxt])))
    return None


def test_every_module_under_tools_and_agent_has_at_most_430_lines():
    long = {name: n for root in (TOOLS, AGENT) for name, path in _modules(root).items()
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_tools_modules_import_each_other_without_a_circle():
    circle = _circle_in(TOOLS)
    assert circle is None, "import circle: " + " -> ".join(circle)


def test_agent_modules_import_each_other_without_a_circle():
    circle = _circle_in(AGENT)
    assert circle is None, "import circle: " + " -> ".join(circle)


def test_the_circle_check_finds_a_circle_closed_by_a_function_level_import(tmp_path):
    pkg = tmp_path / "agent"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from agent.b import g\n")
    (pkg / "b.py").write_text("def g():\n    from agent import a\n    return a\n")
    assert _circle_in(pkg) in (["agent.a", "agent.b", "agent.a"], ["agent.b", "agent.a", "agent.b"])


def test_nothing_under_tools_imports_langgraph_or_the_agent():
    bad = []
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            roots = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            bad += [f"{name}: {r}" for r in roots if r.split(".")[0] in ("langgraph", "agent")]
    assert not bad, f"tools/ must run with torch + triton only: {bad}"
