"""LLM backends: the real transformers path on a tiny random Llama, an OpenAI-compatible
server on 127.0.0.1, and replay files."""
from __future__ import annotations

import dataclasses
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from agent.config import AgentConfig, SamplingConfig, load_config
from agent.models.llm import (BackendUnavailable, OpenAIBackend, ReplayBackend, ReplayExhausted,
                       TransformersBackend, make_backend)
from agent.loop.prompting import render_initial
from llm_fixtures import BOS, tiny_llama_dir  # noqa: F401  (pytest fixture)
from tools.errors import BadInput
from tests.run_fixtures import send_json

PROBLEM = "import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x.relu()\n"
SAMPLING = SamplingConfig(max_new_tokens=8, seed=0)


def config(**model) -> AgentConfig:
    return dataclasses.replace(AgentConfig(), model=dataclasses.replace(AgentConfig().model, **model))


# -- transformers, real path, tiny model ---------------------------------------------

@pytest.fixture(scope="module")
def tiny(tiny_llama_dir):
    backend = make_backend(str(tiny_llama_dir), AgentConfig())
    backend.load()
    return backend


def test_plain_spec_makes_a_transformers_backend_that_loads_nothing_yet(tiny_llama_dir):
    backend = make_backend(str(tiny_llama_dir), AgentConfig())
    assert isinstance(backend, TransformersBackend) and backend.model is None and backend.tokenizer is None


def test_transformers_generates_n_completions_that_exclude_the_prompt(tiny):
    prompt = render_initial(PROBLEM)
    completions = tiny.generate(prompt, 2, SAMPLING)
    assert len(completions) == 2
    for c in completions:
        assert "You write custom Triton kernels" not in c.text and PROBLEM not in c.text
        assert c.prompt_tokens == tiny.count_tokens(prompt)
        assert 1 <= c.completion_tokens <= SAMPLING.max_new_tokens
        assert c.finish_reason in ("stop", "length")


def test_transformers_feeds_the_prompt_with_exactly_one_bos(tiny, monkeypatch):
    seen = []
    real = tiny.model.generate
    monkeypatch.setattr(tiny.model, "generate", lambda **kw: seen.append(kw["input_ids"]) or real(**kw))
    prompt = render_initial(PROBLEM)
    tiny.generate(prompt, 2, SAMPLING)
    bos = tiny.tokenizer.convert_tokens_to_ids(BOS)
    assert seen[0][0].tolist().count(bos) == 1
    # the tokenizer's default would have added a second one
    assert tiny.tokenizer(prompt)["input_ids"].count(bos) == 2


def test_transformers_cuts_the_completion_by_token_ids(tiny, monkeypatch):
    outputs = []
    real = tiny.model.generate
    monkeypatch.setattr(tiny.model, "generate", lambda **kw: outputs.append(real(**kw)) or outputs[-1])
    prompt = render_initial(PROBLEM)
    n_prompt = len(tiny.encode(prompt))
    completions = tiny.generate(prompt, 2, SAMPLING)
    for row, c in zip(outputs[0].tolist(), completions):
        answer = row[n_prompt:][:c.completion_tokens]
        assert c.text == tiny.tokenizer.decode(answer, skip_special_tokens=True)


def test_transformers_stream_yields_the_answer_in_pieces(tiny):
    pieces = list(tiny.stream(render_initial(PROBLEM), SAMPLING))
    assert pieces and "You write custom" not in "".join(pieces)


def test_a_missing_model_directory_is_backend_unavailable_in_one_line(tmp_path):
    backend = make_backend(str(tmp_path / "no-such-model"), AgentConfig())
    with pytest.raises(BackendUnavailable, match="no such model directory") as e:
        backend.load()
    assert "\n" not in str(e.value) and "openai:" in str(e.value) and "replay:FILE" in str(e.value)


def test_a_plain_file_as_model_is_named_a_file_not_a_missing_directory(tmp_path):
    weights = tmp_path / "weights.bin"
    weights.write_bytes(b"\0" * 16)
    with pytest.raises(BackendUnavailable, match="is a file, not a model") as e:
        make_backend(str(weights), AgentConfig()).load()
    assert "\n" not in str(e.value) and str(weights) in str(e.value)


def test_a_directory_without_config_json_is_named_so(tmp_path):
    with pytest.raises(BackendUnavailable, match="has no config.json"):
        make_backend(str(tmp_path), AgentConfig()).load()


def test_a_relative_name_that_exists_here_is_a_path_not_a_hub_id(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mymodel").write_text("not a model")
    with pytest.raises(BackendUnavailable, match="is a file, not a model"):
        make_backend("mymodel", AgentConfig()).load()


def test_a_broken_model_directory_is_backend_unavailable(tmp_path):
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(BackendUnavailable, match="cannot load"):
        make_backend(str(tmp_path), AgentConfig()).load()


def test_a_model_too_large_for_cpu_is_refused_without_a_gpu(tiny_llama_dir):
    backend = TransformersBackend(str(tiny_llama_dir), config(cpu_max_billion_params=1e-6).model, device="cpu")
    with pytest.raises(BackendUnavailable, match="too large for CPU"):
        backend.load()
    assert backend.model is None


@pytest.fixture
def hub_unreachable(monkeypatch):
    """The hub endpoint is a closed local port (refused at once); no proxy, not offline."""
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    for k in ("HF_HUB_OFFLINE", "HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy",
              "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(k, raising=False)


def test_an_uncached_hub_id_with_the_hub_unreachable_fails_in_one_line(hub_unreachable):
    backend = make_backend("krefine-tests/not-a-model", AgentConfig())
    with pytest.raises(BackendUnavailable, match="not in the local Hugging Face cache and "
                                                 "127.0.0.1:9 is unreachable") as e:
        backend.load()
    assert "\n" not in str(e.value) and backend.model is None


def test_a_cached_hub_id_with_the_hub_unreachable_loads_from_the_cache(hub_unreachable, monkeypatch, tmp_path):
    import huggingface_hub.constants
    from agent.models.transformers_backend import _hub_kwargs
    snap = tmp_path / "models--org--cached" / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text("{}")
    (tmp_path / "models--org--cached" / "refs").mkdir()
    (tmp_path / "models--org--cached" / "refs" / "main").write_text("abc123")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    assert _hub_kwargs("org/cached") == {"local_files_only": True}


def test_behind_a_proxy_the_hub_is_not_probed_directly(hub_unreachable, monkeypatch):
    from agent.models.transformers_backend import _hub_kwargs
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    assert _hub_kwargs("krefine-tests/not-a-model") == {}


# -- replay ----------------------------------------------------------------------------

def write_jsonl(path, records) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def test_replay_hands_out_completions_in_file_order_one_per_candidate(tmp_path):
    backend = make_backend("replay:" + write_jsonl(tmp_path / "r.jsonl", [{"completion": c} for c in "abcde"]),
                           AgentConfig())
    assert [c.text for c in backend.generate("p", 2, SAMPLING)] == ["a", "b"]
    assert [c.text for c in backend.generate("p", 2, SAMPLING)] == ["c", "d"]


def test_replay_returns_what_is_left_then_raises_exhausted(tmp_path):
    backend = ReplayBackend(write_jsonl(tmp_path / "r.jsonl", [{"completion": c} for c in "abc"]))
    assert [c.text for c in backend.generate("p", 2, SAMPLING)] == ["a", "b"]
    assert [c.text for c in backend.generate("p", 2, SAMPLING)] == ["c"]
    with pytest.raises(ReplayExhausted):
        backend.generate("p", 2, SAMPLING)


def test_replay_file_records_carry_their_tokens_and_model(tmp_path):
    records = [{"candidate": "r01-c00", "completion": "x = 1", "completion_tokens": 3, "model": "facebook/KernelLLM"},
               {"candidate": "r01-c01", "completion": "y = 2", "prompt": "ignored"}]
    write_jsonl(tmp_path / "completions.jsonl", records)
    first, second = make_backend(f"replay:{tmp_path / 'completions.jsonl'}", AgentConfig()).generate("p", 2, SAMPLING)
    assert (first.text, first.completion_tokens, first.model) == ("x = 1", 3, "facebook/KernelLLM")
    assert second.text == "y = 2"


def test_replay_seek_skips_completions_already_used(tmp_path):
    backend = ReplayBackend(write_jsonl(tmp_path / "r.jsonl", [{"completion": c} for c in "abc"]))
    backend.seek(2)
    assert [c.text for c in backend.generate("p", 2, SAMPLING)] == ["c"]


def test_replay_skips_a_last_line_torn_by_a_crash(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text('{"completion": "a"}\n{"completion": "b')
    assert [c.text for c in ReplayBackend(path).generate("p", 5, SAMPLING)] == ["a"]


@pytest.mark.parametrize("text, fault", [
    ('{"completion": "a"}\nnot json\n{"completion": "b"}\n', "line 2: not JSON"),
    ('{"candidate": "r01-c00"}\n', 'line 1: expected an object with a "completion" string'),
    ('["a"]\n', 'line 1: expected an object'),
    ('{"completion": 3}\n', 'line 1: expected an object'),
    ("\n\n", "holds no completions"),
])
def test_a_bad_replay_file_is_bad_input_naming_the_file_and_line(tmp_path, text, fault):
    path = tmp_path / "bad.jsonl"
    path.write_text(text)
    with pytest.raises(BadInput, match=f"^{path}: {fault}"):
        make_backend(f"replay:{path}", AgentConfig())


def test_a_missing_replay_file_is_bad_input(tmp_path):
    with pytest.raises(BadInput, match="no such replay file"):
        make_backend(f"replay:{tmp_path / 'nope.jsonl'}", AgentConfig())


def test_a_replay_path_that_is_a_fifo_is_bad_input_not_a_hang(tmp_path):
    import os
    fifo = tmp_path / "completions.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(BadInput, match="replay path is not a regular file"):
        make_backend(f"replay:{fifo}", AgentConfig())


# -- OpenAI-compatible server ------------------------------------------------------------

class FakeServer:
    """A vLLM-like server on 127.0.0.1: canned answers, every request recorded."""

    def __init__(self):
        self.requests: list[dict] = []
        self.failures: list[int] = []      # HTTP statuses to answer first, one per request
        self.tokenize = True
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                self._answer({"data": [{"id": "facebook/KernelLLM"}]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
                if fake.failures:
                    return self._answer({"error": "busy"}, fake.failures.pop(0))
                if self.path == "/tokenize":
                    return self._answer({"count": 42} if fake.tokenize else {"error": "no"}, 200 if fake.tokenize else 404)
                if body.get("stream"):
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.end_headers()
                    for piece in ("import ", "torch", "\n"):
                        self.wfile.write(f"data: {json.dumps({'choices': [{'text': piece}]})}\n\n".encode())
                    self.wfile.write(b"data: [DONE]\n\n")
                    return
                n = body["n"]
                # answered out of order on purpose: the client sorts by index
                choices = [{"index": i, "text": f"answer {i}" + "!" * i, "finish_reason": "stop"} for i in range(n)][::-1]
                self._answer({"model": body["model"], "choices": choices,
                              "usage": {"prompt_tokens": 17, "completion_tokens": 10 * n}})

            def _answer(self, doc, status=200):
                send_json(self, doc, status)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def server():
    s = FakeServer()
    yield s
    s.close()


def openai(server, **model) -> OpenAIBackend:
    model = {"request_timeout_s": 5.0, "retry_backoff_s": 0.01, **model}
    return make_backend(f"openai:{server.url}/v1", config(**model))


def test_openai_posts_v1_completions_with_n_and_the_sampling_settings(server):
    completions = openai(server).generate("PROMPT", 3, SamplingConfig(temperature=1.0, top_p=0.97, max_new_tokens=64))
    request = server.requests[-1]
    assert request["path"] == "/v1/completions"
    assert request["body"] == {"model": "facebook/KernelLLM", "prompt": "PROMPT", "n": 3, "temperature": 1.0,
                               "top_p": 0.97, "max_tokens": 64, "add_special_tokens": False}
    assert [c.text for c in completions] == ["answer 0", "answer 1!", "answer 2!!"]
    assert [c.prompt_tokens for c in completions] == [17, 17, 17] and sum(c.completion_tokens for c in completions) == 30


def test_openai_key_comes_from_the_env_variable_named_in_config(server, monkeypatch):
    monkeypatch.setenv("KREFINE_TEST_KEY", "sekret")
    openai(server, openai_api_key_env="KREFINE_TEST_KEY").generate("p", 1, SAMPLING)
    assert server.requests[-1]["auth"] == "Bearer sekret"


def test_openai_retries_a_5xx_answer_then_succeeds(server):
    server.failures = [503, 500]
    assert openai(server, max_retries=2).generate("p", 1, SAMPLING)[0].text == "answer 0"
    assert len(server.requests) == 3


def test_openai_client_error_is_backend_unavailable_at_once(server):
    server.failures = [400]
    with pytest.raises(BackendUnavailable, match="answered HTTP 400") as e:
        openai(server, max_retries=2).generate("p", 1, SAMPLING)
    assert len(server.requests) == 1 and "\n" not in str(e.value)


def test_openai_unreachable_server_is_backend_unavailable_in_one_line(server):
    url = server.url
    server.close()
    backend = make_backend(f"openai:{url}", config(request_timeout_s=2.0, max_retries=1, retry_backoff_s=0.01))
    with pytest.raises(BackendUnavailable, match="cannot reach") as e:
        backend.load()
    assert "\n" not in str(e.value)


def test_openai_refused_connection_is_server_unreachable_naming_the_server(server):
    from agent.models.llm import ServerUnreachable
    url = server.url
    server.close()
    with pytest.raises(ServerUnreachable, match="Connection refused") as e:
        make_backend(f"openai:{url}/v1/", config(max_retries=0)).load()
    assert e.value.server == url


def test_a_server_url_without_a_scheme_is_one_line_with_a_hint():
    with pytest.raises(BadInput) as e:
        make_backend("openai:localhost:59999", AgentConfig())
    assert str(e.value) == "openai:localhost:59999: the server URL needs a scheme, e.g. openai:http://localhost:59999"


def test_run_refuses_a_server_url_without_a_scheme_before_any_work(tmp_path, capsys):
    from agent.cli import main
    from agent import DEFAULT_CONFIG
    out = tmp_path / "run"
    assert main(["run", str(DEFAULT_CONFIG.parent / "examples" / "relu.py"), "--model", "openai:localhost:59999",
                 "--out", str(out)]) == 2
    assert capsys.readouterr().err == ("krefine: error: --model 'openai:localhost:59999': the server URL needs a "
                                       "scheme, e.g. openai:http://localhost:59999\n")
    assert not out.exists()


def test_openai_counts_tokens_with_tokenize_when_the_server_has_it(server):
    assert openai(server).count_tokens("some text") == 42


def test_openai_estimates_tokens_when_the_server_has_no_tokenize(server):
    server.tokenize = False
    backend = openai(server)
    assert backend.count_tokens("x" * 400) == 100
    backend.count_tokens("y")
    assert sum(r["path"] == "/tokenize" for r in server.requests) == 1   # asked once only


def test_openai_stream_yields_the_server_sent_pieces(server):
    assert "".join(openai(server).stream("p", SAMPLING)) == "import torch\n"


def test_openai_without_bos_suppression_sends_no_extension_field(server):
    openai(server, openai_suppress_bos=False).generate("p", 1, SAMPLING)
    assert "add_special_tokens" not in server.requests[-1]["body"]


def test_load_config_model_id_override_reaches_make_backend(tmp_path):
    path = write_jsonl(tmp_path / "r.jsonl", [{"completion": "a"}])
    cfg = load_config(overrides={"model.id": f"replay:{path}"})
    assert isinstance(make_backend(cfg.model.id, cfg), ReplayBackend)


def test_replay_with_no_file_names_none_not_the_working_directory():
    from agent.models.llm import check_spec
    from tools.errors import BadInput
    with pytest.raises(BadInput, match="names no file"):
        check_spec("replay:")
