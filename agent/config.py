"""The agent's configuration: agent.toml loaded once into frozen, validated dataclasses.

Covers the [model] [sampling] [budget] [search] [prompt] [run] [bench] tables, plus the
evaluator's [eval] [timing] [guards] tables through tools/settings.py, and CLI-style
dotted overrides. Every dataclass goes through `tools.settings.build()`, so an unknown
key or a wrong type is an error, never a silent default. The defaults here are the
defaults written in agent.toml; tests/test_config.py keeps the two equal.

Does not read the environment (the OpenAI key is read by agent/llm.py's make_backend,
by the variable named here) and does not decide anything about a run.
"""
from __future__ import annotations

import copy
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from agent import DEFAULT_CONFIG
from tools.errors import BadInput
from tools.settings import EvalSettings, SettingsError, build, eval_settings_from_toml

DEFAULT_MODEL_ID = "facebook/KernelLLM"


@dataclass(frozen=True)
class ModelConfig:
    """[model]: which KernelLLM to talk to and how to load or reach it."""
    id: str = DEFAULT_MODEL_ID          # HF id | local path | "openai:URL" | "replay:FILE"
    dtype: Literal["bfloat16", "float16", "float32"] = "bfloat16"  # on GPU; CPU is always float32
    device_map: str = "auto"            # from_pretrained's device_map on GPU (needs accelerate; else cuda:0)
    cpu_max_billion_params: float = 1.0 # refuse larger models without a GPU (KernelLLM is 8B)
    openai_base_url: str = ""           # non-empty: serve `id` from this OpenAI-compatible server
    openai_api_key_env: str = "OPENAI_API_KEY"  # env variable holding the server's key (may be unset)
    served_model_name: str = ""         # "model" field sent to the server; empty: `id` (what `vllm serve ID` uses)
    openai_suppress_bos: bool = True    # send add_special_tokens=false (vLLM) so no second BOS is added
    request_timeout_s: float = 600.0    # one HTTP request to the server, all n completions
    max_retries: int = 2                # retries of a failed request (connection, 429, 5xx)
    retry_backoff_s: float = 2.0        # first retry delay; doubles each retry

    def validate(self) -> str | None:
        if not self.id.strip():
            return "id must not be empty"
        if self.request_timeout_s <= 0 or self.retry_backoff_s < 0 or self.max_retries < 0:
            return "request_timeout_s must be positive, retries and backoff not negative"
        return None


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

    def validate(self) -> str | None:
        if self.temperature < 0:
            return "temperature must not be negative"
        if not 0 < self.top_p <= 1:
            return "top_p must be in (0, 1]"
        if self.top_k < 0 or self.max_new_tokens < 1:
            return "top_k must not be negative and max_new_tokens at least 1"
        return None


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

    def validate(self) -> str | None:
        if self.max_rounds < 1 or self.candidates_per_round < 1:
            return "max_rounds and candidates_per_round must be at least 1"
        if self.target_speedup <= 0 or self.time_budget_s <= 0 or self.token_budget < 0:
            return "target_speedup and time_budget_s must be positive, token_budget not negative"
        if not 0 <= self.roofline_stop_fraction <= 1:
            return "roofline_stop_fraction must be in [0, 1]"
        return None


@dataclass(frozen=True)
class SearchConfig:
    """[search]: which candidates the next round refines."""
    strategy: Literal["greedy", "beam"] = "greedy"  # greedy: refine the best; beam: the top beam_width
    beam_width: int = 2
    repair_failed: bool = True          # a failed candidate may be refined from its own feedback
    seed: Literal["none", "inductor"] = "none"  # inductor: round 0 is torch.compile's kernels in KernelBook format
    seed_timeout_s: float = 600.0       # torch.compile of the problem for the seed (its own process)

    def validate(self) -> str | None:
        if self.seed_timeout_s <= 0:
            return "seed_timeout_s must be positive"
        return "beam_width must be at least 1" if self.beam_width < 1 else None


@dataclass(frozen=True)
class PromptConfig:
    """[prompt]: how much a refinement prompt may carry (8B model, long-context but weak at it)."""
    feedback_token_budget: int = 1024   # the verdict feedback block; least important parts cut first
    max_prompt_tokens: int = 8192       # whole prompt; the in-context example is dropped first, then feedback
    include_example: bool = True        # keep the add_kernel example of the trained template in refinements

    def validate(self) -> str | None:
        if self.feedback_token_budget < 0 or self.max_prompt_tokens < 1:
            return "feedback_token_budget must not be negative, max_prompt_tokens positive"
        return None


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

    def validate(self) -> str | None:
        if self.ray_address and not RAY_ADDRESS.match(self.ray_address):
            return f"ray_address {self.ray_address!r}: expected auto, local, HOST:PORT or ray://HOST:PORT"
        if self.judges < 0 or self.problems_in_flight < 0:
            return "judges and problems_in_flight must not be negative"
        if self.judge_cache < 1 or self.model_gpus < 1:
            return "judge_cache and model_gpus must be at least 1"
        if self.start_timeout_s <= 0 or self.progress_interval_s <= 0:
            return "start_timeout_s and progress_interval_s must be positive"
        return None


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


def load_config(path: str | Path | None = None, overrides: dict[str, Any] | None = None) -> AgentConfig:
    """Read agent.toml (the repo's when `path` is None; the same defaults when krefine
    is installed without it) and apply dotted overrides.

    `overrides` maps "table.key" to a value, e.g. {"budget.max_rounds": 3,
    "model.id": "replay:x.jsonl"}; a None value is skipped (an unset CLI flag). Any
    problem is a BadInput naming the file and the table/key at fault.
    """
    if path is None and not DEFAULT_CONFIG.exists():
        doc: dict = {}          # installed without the repo's agent.toml: its defaults are ours
        path = DEFAULT_CONFIG
    else:
        path = Path(path) if path is not None else DEFAULT_CONFIG
        doc = _parse(path)
    # 1) the file alone, so a fault in it is reported as the file's
    config = _build(doc, path, "")
    # 2) overrides on top
    live = {k: v for k, v in (overrides or {}).items() if v is not None}
    if not live:
        return config
    merged = copy.deepcopy(doc)
    for key, value in live.items():
        table, _, name = str(key).partition(".")
        if not name or "." in name or table not in (*AGENT_TABLES, *EVAL_TABLES):
            raise BadInput(path, f"override {key!r}: expected TABLE.KEY with TABLE one of "
                                 f"{', '.join((*AGENT_TABLES, *EVAL_TABLES))}")
        merged.setdefault(table, {})[name] = value
    return _build(merged, path, f" (with overrides {', '.join(sorted(live))})")


def _parse(path: Path) -> dict:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BadInput(path, "no such config file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise BadInput(path, f"cannot read: {e}") from None
    except tomllib.TOMLDecodeError as e:
        raise BadInput(path, f"not valid TOML: {e}") from None


def _build(doc: dict, path: Path, note: str) -> AgentConfig:
    unknown = sorted(set(doc) - set(AGENT_TABLES) - set(EVAL_TABLES))
    if unknown:
        raise BadInput(path, f"unknown table(s) {', '.join(f'[{t}]' for t in unknown)}; known: "
                             f"{', '.join(f'[{t}]' for t in (*AGENT_TABLES, *EVAL_TABLES))}")
    try:
        for name in (*AGENT_TABLES, *EVAL_TABLES):
            if not isinstance(doc.get(name, {}), dict):
                raise SettingsError(f"[{name}]: expected a table")
        tables = {name: build(cls, doc.get(name), f"[{name}]") for name, cls in AGENT_TABLES.items()}
        evaluator = eval_settings_from_toml(doc, where="")
    except SettingsError as e:
        raise BadInput(path, f"{e}{note}") from None
    return AgentConfig(**tables, eval=evaluator)
