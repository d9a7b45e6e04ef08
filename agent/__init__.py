"""krefine's orchestrator: config, the langgraph loop, LLM backends, prompts, traces,
reports and the `krefine` CLI. Never imports or runs candidate code in its own process:
every candidate goes through tools/ (the evaluator) in a sandboxed worker.
"""
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
PROMPTS_DIR = REPO_ROOT / "prompts"
PROFILES_DIR = REPO_ROOT / "profiles"
DEFAULT_CONFIG = REPO_ROOT / "agent.toml"
