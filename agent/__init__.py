"""krefine's orchestrator, in rooms: cli/ (the `krefine` command), loop/ (one run: the
langgraph loop, its state and run directory), models/ (where candidates come from),
bench/ (many problems, on one host or Ray); config.py beside them. Never imports or runs
candidate code in its own process: every candidate goes through tools/ (the evaluator)
in a sandboxed worker. docs/DESIGN.md walks one candidate through them.
"""
from pathlib import Path

import tools  # noqa: F401  (first: makes ast.parse thread-safe where CPython needs it, tools/astlock.py)

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CONFIG = REPO_ROOT / "agent.toml"
