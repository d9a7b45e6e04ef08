"""`krefine run FILE` with the default model where it cannot load (no weights, no GPU, no
server): one line, then the seed and the search as `--model none --seed-kernel inductor`.
A model the user named stays a one-line error, exit 2."""
from __future__ import annotations

import pytest

from tests.run_fixtures import REPO, cli, fast_config
from tools.jsonio import read_json

PROBLEM = str(REPO / "tests" / "problems" / "relu.py")
FALLBACK = "going on without a model"


def _isolated(tmp_path):
    """An empty Hugging Face cache: the default model is not there, and HF_HUB_OFFLINE
    (cli_env) keeps the hub out of reach."""
    return {"HF_HOME": str(tmp_path / "hf")}


def test_a_named_model_that_cannot_load_is_one_line_and_exit_2_even_when_it_is_the_default(tmp_path):
    r = cli("run", PROBLEM, "--model", "facebook/KernelLLM", "--device", "cpu", "--out", str(tmp_path / "run"),
            env=_isolated(tmp_path))
    assert r.returncode == 2, r.stdout + r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and FALLBACK not in r.stderr
    assert "--model none --seed-kernel inductor" in r.stderr and ".gguf" in r.stderr
    assert not (tmp_path / "run").exists()


def test_a_model_named_in_the_users_agent_toml_is_not_replaced(tmp_path):
    (tmp_path / "agent.toml").write_text(f'[model]\nid = "{tmp_path / "no-such-model"}"\n')
    r = cli("run", PROBLEM, "--device", "cpu", "--out", str(tmp_path / "run"), cwd=tmp_path, env=_isolated(tmp_path))
    assert r.returncode == 2 and "no such model directory" in r.stderr and FALLBACK not in r.stderr


@pytest.mark.slow
def test_the_default_model_that_cannot_load_gives_way_to_the_seed_and_the_search(tmp_path):
    out = tmp_path / "run"
    r = cli("run", PROBLEM, "--config", str(fast_config(tmp_path)), "--device", "cpu", "--out", str(out),
            env=_isolated(tmp_path), timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    said = [line for line in r.stderr.splitlines() if FALLBACK in line]
    assert len(said) == 1 and "facebook/KernelLLM cannot be loaded here" in said[0]
    meta, summary = read_json(out / "run.json"), read_json(out / "summary.json")
    assert meta["model"] == "none" and meta["model_fallback"]["model"] == "facebook/KernelLLM"
    assert summary["seed"]["status"] == "correct" and summary["best"] is not None
    assert (out / "best.py").is_file()
