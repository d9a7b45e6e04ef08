"""The kernelllm.py drop-in (KernelLLM class) and `krefine repl`."""
from __future__ import annotations

import argparse
import io
import json

import pytest

from agent import cli
from agent.config import AgentConfig, SamplingConfig
from agent.models.kernelllm import KernelLLM
from agent.models.llm import Completion
from agent.loop.prompting import render_initial
from agent.cli.repl import run_repl
from llm_fixtures import tiny_llama_dir  # noqa: F401  (pytest fixture)

MODULE = "import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n"
ANSWER = "```python\nimport torch\n\nclass ModelNew(torch.nn.Module):\n    pass\n```"


class RecordingBackend:
    """Answers ANSWER to every prompt and keeps what it was asked."""
    name = "recording"

    def __init__(self):
        self.calls: list[tuple[str, int, SamplingConfig]] = []

    def generate(self, prompt: str, n: int, sampling: SamplingConfig) -> list[Completion]:
        self.calls.append((prompt, n, sampling))
        return [Completion("  " + ANSWER + "\n", 1, 1, self.name)] * n

    def count_tokens(self, text: str) -> int:
        return len(text)


def test_generate_triton_prompts_with_the_trained_template():
    backend = RecordingBackend()
    KernelLLM(backend=backend).generate_triton(MODULE)
    assert backend.calls[0][0] == render_initial(MODULE)


def test_generate_raw_returns_the_stripped_answer_to_the_prompt_verbatim():
    backend = RecordingBackend()
    assert KernelLLM(backend=backend).generate_raw("hello") == ANSWER
    assert backend.calls[0][:2] == ("hello", 1)


def test_temperature_and_max_new_tokens_reach_the_backend():
    backend = RecordingBackend()
    KernelLLM(backend=backend).generate_triton(MODULE, temperature=1.0, max_new_tokens=99)
    sampling = backend.calls[0][2]
    assert (sampling.temperature, sampling.max_new_tokens, sampling.top_p) == (1.0, 99, AgentConfig().sampling.top_p)


def test_stream_raw_prints_the_answer_and_returns_it():
    out = io.StringIO()
    text = KernelLLM(backend=RecordingBackend()).stream_raw("hello", file=out)
    assert ANSWER in text and ANSWER in out.getvalue()


def test_kernelllm_on_the_tiny_model_loads_in_the_constructor_and_generates(tiny_llama_dir):
    llm = KernelLLM(str(tiny_llama_dir), device="cpu")
    assert llm.model is not None and llm.tokenizer is not None and llm.device == "cpu"
    text = llm.generate_triton(MODULE, max_new_tokens=6)
    assert isinstance(text, str) and "You write custom Triton kernels" not in text
    streamed = llm.stream_raw(render_initial(MODULE), max_new_tokens=6, file=io.StringIO())
    assert "You write custom Triton kernels" not in streamed


def test_repl_renders_the_prompt_from_what_was_pasted():
    backend = RecordingBackend()
    out = io.StringIO()
    assert run_repl(KernelLLM(backend=backend), io.StringIO(MODULE + "END\nexit\nEND\n"), out) == 0
    assert [c[0] for c in backend.calls] == [render_initial(MODULE)]
    assert ANSWER in out.getvalue()


def test_repl_takes_one_module_per_end_line_and_stops_at_eof():
    backend = RecordingBackend()
    second = MODULE.replace("x * 2", "x * 3")
    run_repl(KernelLLM(backend=backend), io.StringIO(MODULE + "END\n" + second), io.StringIO())
    assert [c[0] for c in backend.calls] == [render_initial(MODULE), render_initial(second)]


def test_repl_skips_an_empty_paste():
    backend = RecordingBackend()
    run_repl(KernelLLM(backend=backend), io.StringIO("END\n\nEND\n"), io.StringIO())
    assert backend.calls == []


def test_krefine_repl_streams_a_replayed_answer(tmp_path, monkeypatch, capsys):
    replay = tmp_path / "r.jsonl"
    replay.write_text(json.dumps({"completion": ANSWER}) + "\n")
    monkeypatch.setattr("sys.stdin", io.StringIO(MODULE + "END\n"))
    from agent.cli import repl
    assert repl.main(argparse.Namespace(model=f"replay:{replay}", config=None)) == 0
    assert ANSWER in capsys.readouterr().out


def test_krefine_repl_ends_where_the_recorded_completions_run_out(tmp_path, monkeypatch, capsys):
    replay = tmp_path / "r.jsonl"
    replay.write_text(json.dumps({"completion": ANSWER}) + "\n")
    monkeypatch.setattr("sys.stdin", io.StringIO(MODULE + "END\n" + MODULE + "END\n" + MODULE + "END\n"))
    from agent.cli import repl
    assert repl.main(argparse.Namespace(model=f"replay:{replay}", config=None)) == 0
    assert "all 1 recorded completions are used" in capsys.readouterr().out


def test_krefine_repl_with_stdin_closed_is_bad_input(tmp_path, monkeypatch, capsys):
    replay = tmp_path / "r.jsonl"
    replay.write_text(json.dumps({"completion": ANSWER}) + "\n")
    monkeypatch.setattr("sys.stdin", None)
    assert cli.main(["repl", "--model", f"replay:{replay}"]) == 2
    assert "standard input, and it is closed" in capsys.readouterr().err


def test_krefine_repl_with_a_model_that_cannot_load_says_so_in_one_line_and_exits_2(tmp_path, monkeypatch, capsys):
    toml = tmp_path / "agent.toml"
    toml.write_text(f'[model]\nid = "{tmp_path / "missing-model"}"\n')
    monkeypatch.chdir(tmp_path)           # ./agent.toml is read where krefine runs: the user's file
    monkeypatch.setattr("sys.stdin", io.StringIO(MODULE + "END\n"))
    assert cli.main(["repl"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no such model directory" in err and "replay:FILE" in err


@pytest.mark.parametrize("spec", ["openai:http://127.0.0.1:9", "replay:/no/such/file.jsonl"])
def test_kernelllm_takes_server_and_replay_specs_too(spec):
    from tools.errors import BadInput
    with pytest.raises(BadInput):        # both fail here: nothing listens on port 9, no such file
        KernelLLM(spec, config=AgentConfig())
