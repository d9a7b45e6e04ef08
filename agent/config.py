"""The agent's configuration: agent.toml loaded once into frozen, validated dataclasses.

Covers the [model] [sampling] [budget] [search] [prompt] [run] [bench] tables, plus the
evaluator's [eval] [timing] [guards] tables through tools/settings.py, and CLI-style
dotted overrides. Every dataclass goes through `tools.settings.build()`, so an unknown
key or a wrong type is an error, never a silent default. The defaults here are the
defaults written in agent.toml; tests/test_config.py keeps the two equal.

Does not read the environment (the OpenAI key is read by agent/models/llm.py's make_backend,
by the variable named here) and does not decide anything about a run.
"""
from __future__ import annotations

import copy
import re
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from agent import DEFAULT_CONFIG
from tools.errors import BadInput
from tools.settings import (EvalSettings, Fault, SettingsError, at_least, between, build, eval_settings_from_toml,
                            positive)

DEFAULT_MODEL_ID = "facebook/KernelLLM"


@dataclass(frozen=True)
class ModelConfig:
    """[model]: which KernelLLM to talk to and how to load or reach it."""
    id: str = DEFAULT_MODEL_ID          # HF id | local directory | FILE.gguf | "openai:URL" | "replay:FILE" | "none" (seed + sweep only)
    dtype: Literal["bfloat16", "float16", "float32"] = "bfloat16"  # on GPU; CPU is always float32
    device_map: str = "auto"            # from_pretrained's device_map on GPU (needs accelerate; else cuda:0)
    cpu_max_billion_params: float = 1.0 # refuse larger models without a GPU (KernelLLM is 8B)
    # transformers only: wrap the prompt in the tokenizer's chat template as one user turn;
    # auto: when it has one and does not know <|begin_of_text|> (not KernelLLM's vocabulary)
    chat_template: Literal["auto", "always", "never"] = "auto"
    openai_api_key_env: str = "OPENAI_API_KEY"  # env variable holding the server's key (may be unset)
    # openai:URL only: the raw prompt to /v1/completions, or one user turn to /v1/chat/completions;
    # auto: completions, then chat for the rest of the run once the server answers it has no /v1/completions
    api: Literal["auto", "completions", "chat"] = "auto"
    served_model_name: str = ""         # "model" sent to an openai:URL server; empty: the one it lists, else KernelLLM
    openai_suppress_bos: bool = True    # send add_special_tokens=false (vLLM) so no second BOS is added
    request_timeout_s: float = 600.0    # longest wait for an answer (all n completions) or a stream's next piece
    max_retries: int = 2                # retries of a failed request (connection, 429, 5xx)
    retry_backoff_s: float = 2.0        # first retry delay; doubles each retry

    def validate(self) -> Fault | None:
        if not self.id.strip():
            return Fault("id", "must not be empty")
        fault = self.id.startswith("openai:") and url_fault(self.id[len("openai:"):])
        if fault:
            return Fault("id", f"{self.id!r}: {fault}")
        return (between(self, 1e-3, 7 * 86400.0, "request_timeout_s")
                or between(self, 0, 86400.0, "retry_backoff_s") or between(self, 0, 1000, "max_retries"))


@dataclass(frozen=True)
class SamplingConfig:
    """[sampling]: how candidates are sampled.

    kernelllm.py's defaults are temperature 0.6 / top_p 0.95 (top_k off); the model
    card's pass@k runs used temperature 1.0 / top_p 0.97.
    """
    temperature: float = 0.6            # 0 = greedy
    top_p: float = 0.95
    top_k: int = 0                      # 0 = off, as in kernelllm.py
    max_new_tokens: int = 2048          # per candidate
    seed: int | None = None             # None: fresh randomness on every call

    def validate(self) -> Fault | None:
        if not 0 < self.top_p <= 1:
            return Fault("top_p", f"must be in (0, 1], got {self.top_p:g}")
        return at_least(self, 0, "temperature", "top_k") or at_least(self, 1, "max_new_tokens")


@dataclass(frozen=True)
class BudgetConfig:
    """[budget]: when the loop stops. The first limit reached ends the run."""
    max_rounds: int = 10                # generate -> evaluate rounds
    candidates_per_round: int = 4       # completions sampled per round
    target_speedup: float = 1.1         # stop once a correct candidate is this much faster (margin over noise)
    target_baseline: Literal["eager", "compile"] = "eager"  # the speedup the target is measured against
    time_budget_s: float = 3600.0       # wall clock for the whole run
    token_budget: int = 1_000_000       # prompt + completion tokens for the whole run (0 = no limit)
    roofline_stop_fraction: float = 0.9 # stop when the best reaches this fraction of the roofline speed (0 = never)

    def validate(self) -> Fault | None:
        return (at_least(self, 1, "max_rounds", "candidates_per_round")
                or positive(self, "target_speedup", "time_budget_s") or at_least(self, 0, "token_budget")
                or between(self, 0, 1, "roofline_stop_fraction"))


@dataclass(frozen=True)
class SearchConfig:
    """[search]: which candidates the next round refines."""
    strategy: Literal["greedy", "beam"] = "greedy"  # greedy: refine the best; beam: the top beam_width
    beam_width: int = 2
    repair_failed: bool = True          # a failed candidate may be refined from its own feedback
    seed_kernel: Literal["none", "inductor"] = "none"  # inductor: round 0 is torch.compile's kernels in KernelBook format
    seed_timeout_s: float = 600.0       # torch.compile of the problem for the seed (its own process)
    seed_portfolio: bool = True         # inductor: round 0 is every configuration's seed (tools/dialect/portfolio.py); false: the seed alone, no other configuration compiled
    templates_timeout_s: float = 0.0    # the templates compile's own budget, from when the default's seed is made, within seed_timeout_s (0 = what seed_timeout_s leaves)
    seed_cache: str = "~/.cache/krefine/seeds"  # seeds kept per problem source, device, torch and converter ("" = none)
    sweep_variants: int = 3             # variants per sweep of the best correct candidate sent to the judge (0 = no sweep)
    sweep_budget: int = 18              # sweep variants judged per run, all sweeps together
    prescreen_variants: int = 64        # variants per sweep checked and timed on one input first (0 = no pre-screen)
    prescreen_budget: int = 256         # variants pre-screened per run, all sweeps together
    prescreen_reps: int = 30            # CUDA-graph replays timed per pre-screened variant

    def validate(self) -> Fault | None:
        return positive(self, "seed_timeout_s") or at_least(self, 1, "beam_width", "prescreen_reps") \
            or at_least(self, 0, "sweep_variants", "sweep_budget", "prescreen_variants", "prescreen_budget",
                        "templates_timeout_s")


@dataclass(frozen=True)
class PromptConfig:
    """[prompt]: how much a refinement prompt may carry (8B model, long-context but weak at it)."""
    feedback_token_budget: int = 1024   # the verdict feedback block; least important parts cut first
    max_prompt_tokens: int = 8192       # whole prompt; the in-context example is dropped first, then feedback
    include_example: bool = True        # keep the add_kernel example of the trained template in refinements

    def validate(self) -> Fault | None:
        return at_least(self, 0, "feedback_token_budget") or at_least(self, 1, "max_prompt_tokens")


@dataclass(frozen=True)
class RunConfig:
    """[run]: where runs go and which device evaluates candidates."""
    out_root: str = "runs"              # runs/<date-time>-<problem>/ unless --out
    device: Literal["cuda", "cpu"] | None = None  # None: cuda if present, else cpu


# a Ray cluster's address as ray.init takes it: join the running one, start one here, or a head's GCS
RAY_ADDRESS = re.compile(r"^(auto|local|(ray://)?[A-Za-z0-9_.\-]+:\d{1,5})$")


@dataclass(frozen=True)
class BenchConfig:
    """[bench]: where `krefine bench` judges a suite: this host's GPUs, or a Ray cluster."""
    ray_address: str = ""               # "" = this host; "auto" | "local" | "HOST:PORT" | "ray://HOST:PORT" (--ray)
    judges: int = 0                     # judge actors, one judge_resource unit each; 0 = as many as the cluster has
    judge_resource: str = ""            # "" = "GPU" on cuda, "CPU" on cpu; or a custom resource (ray start --resources)
    judge_cache: int = 4                # problems' judge sessions an actor keeps; the oldest idle one is closed
    model_gpus: int = 1                 # model actors (one GPU each) for a transformers model; openai:/replay: need none
    problems_in_flight: int = 0         # problem loops the driver runs at once; 0 = two per judge
    start_timeout_s: float = 600.0      # for the first judge actor, and every model actor, to start
    progress_interval_s: float = 30.0   # a status line this often: problems done, candidates/min, live judges
    seed_jobs: int = 4                  # Inductor seeds compiled at once per GPU before the suite is judged (0 = each run makes its own)

    def validate(self) -> Fault | None:
        if self.ray_address and not RAY_ADDRESS.match(self.ray_address):
            return Fault("ray_address", f"{self.ray_address!r}: expected auto, local, HOST:PORT or ray://HOST:PORT")
        return (at_least(self, 0, "judges", "problems_in_flight", "seed_jobs") or at_least(self, 1, "judge_cache", "model_gpus")
                or positive(self, "start_timeout_s", "progress_interval_s"))


@dataclass(frozen=True)
class AgentConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    search: SearchConfig = field(default_factory=SearchConfig)
    prompt: PromptConfig = field(default_factory=PromptConfig)
    run: RunConfig = field(default_factory=RunConfig)
    bench: BenchConfig = field(default_factory=BenchConfig)
    eval: EvalSettings = field(default_factory=EvalSettings)


# agent.toml table -> AgentConfig field and dataclass; [eval] [timing] [guards] go to tools/settings.py
AGENT_TABLES = {"model": ModelConfig, "sampling": SamplingConfig, "budget": BudgetConfig,
                "search": SearchConfig, "prompt": PromptConfig, "run": RunConfig, "bench": BenchConfig}
EVAL_TABLES = ("eval", "timing", "guards")


def load_config(path: str | Path | None = None, overrides: dict[str, Any] | None = None,
                origins: dict[str, str] | None = None) -> AgentConfig:
    """Read agent.toml (when `path` is None: ./agent.toml in the working directory if
    there is one, else the repo's; the same defaults when krefine is installed without
    it) and apply dotted overrides.

    `overrides` maps "table.key" to a value, e.g. {"budget.max_rounds": 3,
    "model.id": "replay:x.jsonl"}; a None value is skipped (an unset CLI flag). Any
    problem is a BadInput naming the file and the table/key at fault, or, when an
    override is at fault, the override as `origins` names it (the flag that set it,
    {"budget.candidates_per_round": "--candidates"}): "--candidates must be at least 1, got 0".
    """
    if path is None and Path("agent.toml").is_file():
        path = Path("agent.toml")   # the user's, where they run krefine: as --config agent.toml
    if path is None and not DEFAULT_CONFIG.exists():
        doc: dict = {}          # installed without the repo's agent.toml: its defaults are ours
        path = DEFAULT_CONFIG
    else:
        path = Path(path) if path is not None else DEFAULT_CONFIG
        doc = _parse(path)
    live: dict[str, Any] = {}     # the overrides that are set

    # 1) the file alone, so a fault in it is reported as the file's
    try:
        config = _build(doc)
    except SettingsError as e:
        raise BadInput(path, str(e)) from None
    # 2) overrides on top
    for key, value in (overrides or {}).items():
        if value is None:
            continue
        table, _, name = str(key).partition(".")
        if not name or "." in name or table not in (*AGENT_TABLES, *EVAL_TABLES):
            raise BadInput("", f"{(origins or {}).get(key) or f'override {key!r}'}: expected "
                               f"TABLE.KEY with TABLE one of {', '.join((*AGENT_TABLES, *EVAL_TABLES))}")
        live[key] = value
    if not live:
        return config
    merged = copy.deepcopy(doc)
    for key, value in live.items():
        table, _, name = key.partition(".")
        merged.setdefault(table, {})[name] = value
    try:
        return _build(merged)
    except SettingsError as e:
        raise _blame(e, live, origins or {}, path) from None


def _blame(e: SettingsError, live: dict, origins: dict[str, str], path: Path) -> BadInput:
    """The fault of a file that was fine alone, put on the one override that caused it,
    named as the user wrote it; the file, with the overrides noted, where that is unclear."""
    def caused(key: str) -> bool:
        table, _, name = key.partition(".")
        return f"[{table}]" in e.where and e.key in (None, name, key.partition(".")[2])
    suspects = [k for k in live if caused(k)]
    if len(suspects) != 1:
        return BadInput(path, f"{e} (with overrides {', '.join(sorted(live))})")
    key = suspects[0]
    name = origins.get(key, f"override {key}")
    return BadInput("", f"{name}{e.after}" if e.key is not None else f"{name}: {e}")


def server_base(url: str) -> str:
    """An OpenAI-compatible server's base URL: no trailing slash, no trailing /v1."""
    base = url.strip().rstrip("/")
    return base[:-3] if base.endswith("/v1") else base


_NOTED: set[str] = set()


def note(text: str) -> None:
    """One line on stderr, once per process (a bench loads the config, and makes a backend, per problem)."""
    if text not in _NOTED:
        _NOTED.add(text)
        print(f"krefine: note: {text}", file=sys.stderr)


def url_fault(url: str) -> str | None:
    """Why `url` cannot be an OpenAI-compatible server's address, or None."""
    from urllib.parse import urlsplit
    parts = urlsplit(url.strip())
    if "://" not in url:
        return f"the server URL needs a scheme, e.g. openai:http://{url.strip()}"
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return "expected an http:// or https:// URL with a host, e.g. openai:http://localhost:8000"
    return None


MAX_CONFIG_BYTES = 16 << 20


def _parse(path: Path) -> dict:
    if path.exists() and not path.is_file():   # a FIFO or a device would be read forever
        raise BadInput(path, "config path is not a regular file")
    try:
        size = path.stat().st_size   # missing: FileNotFoundError, below
        if size > MAX_CONFIG_BYTES:
            raise BadInput(path, f"config file is {size >> 20} MiB; an agent.toml of at most "
                                 f"{MAX_CONFIG_BYTES >> 20} MiB is read")
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BadInput(path, "no such config file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise BadInput(path, f"cannot read: {e}") from None
    except tomllib.TOMLDecodeError as e:
        raise BadInput(path, f"not valid TOML: {e}") from None


def _build(doc: dict) -> AgentConfig:
    """The config of a parsed document; SettingsError naming the table (and key) at fault."""
    unknown = sorted(set(doc) - set(AGENT_TABLES) - set(EVAL_TABLES))
    if unknown:
        raise SettingsError(f"unknown table(s) {', '.join(f'[{t}]' for t in unknown)}; known: "
                            f"{', '.join(f'[{t}]' for t in (*AGENT_TABLES, *EVAL_TABLES))}")
    for name in (*AGENT_TABLES, *EVAL_TABLES):
        if not isinstance(doc.get(name, {}), dict):
            raise SettingsError(f"[{name}]: expected a table", f"[{name}]")
    tables = {name: build(cls, doc.get(name), f"[{name}]") for name, cls in AGENT_TABLES.items()}
    return AgentConfig(**tables, eval=eval_settings_from_toml(doc, where=""))


# ---------------------------------------------------------------- --set TABLE.KEY=VALUE

def split_assignment(text: str, flag: str) -> tuple[str, str]:
    """"budget.max_rounds=3" -> ("budget.max_rounds", "3"); BadInput naming `flag` otherwise."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip() or not value.strip():
        raise BadInput("", f"{flag} {text!r}: expected TABLE.KEY=VALUE")
    return key.strip(), value.strip()


def parse_assignment(text: str, flag: str) -> tuple[str, Any]:
    """A `--set` override: its key, and its value as TOML reads it."""
    key, raw = split_assignment(text, flag)
    return key, toml_value(raw)


def toml_value(raw: str):
    """A value as TOML reads it (2, 1.5, true, "x"); a bare word stays a string."""
    try:
        return tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        return raw.strip()
