"""Evaluator settings: frozen dataclasses built once from agent.toml's tables.

Covers the [eval], [timing] and [guards] tables and the generic, validating
`build()` that every config dataclass in krefine goes through (agent/config.py uses
it too). Does not read files or the environment: callers pass the parsed tables in.
The defaults here are the defaults of agent.toml; tests/test_config.py keeps the two
equal.
"""
from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field


class SettingsError(ValueError):
    """A config table has an unknown key or a value of the wrong type or range.

    `where` is the table as build() was told; `key` the field at fault when one is, and
    `after` what the message says after naming it, so a caller can name the flag that set
    the value instead (agent/config.py: "--candidates must be at least 1, got 0")."""

    def __init__(self, message: str, where: str = "", key: str | None = None, after: str = ""):
        super().__init__(message)
        self.where, self.key, self.after = where, key, after


@dataclass(frozen=True)
class Fault:
    """What a validate() found wrong with one field: "`key` `problem`"."""
    key: str
    problem: str            # "must be at least 1, got 0"

    def __str__(self) -> str:
        return f"{self.key} {self.problem}"


def at_least(obj, low: float, *keys: str) -> Fault | None:
    """For validate(): the first of `keys` whose value is below `low`."""
    return next((Fault(k, f"must be at least {low:g}, got {getattr(obj, k):g}")
                 for k in keys if getattr(obj, k) < low), None)


def positive(obj, *keys: str) -> Fault | None:
    """For validate(): the first of `keys` whose value is not above 0."""
    return next((Fault(k, f"must be positive, got {getattr(obj, k):g}") for k in keys if getattr(obj, k) <= 0), None)


def between(obj, low: float, high: float, *keys: str) -> Fault | None:
    """For validate(): the first of `keys` whose value is outside [low, high]."""
    return next((Fault(k, f"must be between {low:g} and {high:g}, got {getattr(obj, k):g}")
                 for k in keys if not low <= getattr(obj, k) <= high), None)


def build(cls, table: dict | None, where: str):
    """Make dataclass `cls` from a TOML table, refusing unknown keys and wrong types.

    `where` names the table in errors (`agent.toml [eval]`) so a typo in a key never
    silently falls back to a default. validate() may return a message for the table or
    a Fault naming the field.
    """
    table = dict(table or {})
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(table) - names)
    if unknown:
        raise SettingsError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(names))}", where)
    values = {}
    for f in dataclasses.fields(cls):
        if f.name not in table:
            continue
        hint, value = hints[f.name], table[f.name]
        if dataclasses.is_dataclass(hint):
            if not isinstance(value, dict):
                raise SettingsError(f"{where}.{f.name}: expected a table", where, f.name, ": expected a table")
            values[f.name] = build(hint, value, f"{where}.{f.name}")
            continue
        named = f"{where}.{f.name}"
        try:
            values[f.name] = _coerce(hint, value, named)
        except SettingsError as e:
            raise SettingsError(str(e), where, f.name, str(e)[len(named):]) from None
    obj = cls(**values)
    check = getattr(obj, "validate", None)
    if check is not None:
        problem = check()
        if isinstance(problem, Fault):
            raise SettingsError(f"{where}: {problem}", where, problem.key, f" {problem.problem}")
        if problem:
            raise SettingsError(f"{where}: {problem}", where)
    return obj


def _coerce(hint, value, where: str):
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(arg, value, where)
            except SettingsError as e:
                errors.append(str(e))
        raise SettingsError(errors[0] if errors else f"{where}: bad value {value!r}")
    if origin is typing.Literal:
        if value not in args:
            raise SettingsError(f"{where}: {value!r} is not one of {', '.join(map(repr, args))}")
        return value
    if origin in (tuple, list):
        if not isinstance(value, (list, tuple)):
            raise SettingsError(f"{where}: expected a list, got {value!r}")
        inner = args[0] if args else typing.Any
        return tuple(_coerce(inner, v, where) for v in value)
    if hint is typing.Any:
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise SettingsError(f"{where}: expected a number, got {value!r}")
        if value != value or value in (float("inf"), float("-inf")):
            raise SettingsError(f"{where}: expected a finite number, got {value!r}")
        return float(value)
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise SettingsError(f"{where}: expected an integer, got {value!r}")
        return value
    if hint is bool:
        if not isinstance(value, bool):
            raise SettingsError(f"{where}: expected true or false, got {value!r}")
        return value
    if hint is str:
        if not isinstance(value, str):
            raise SettingsError(f"{where}: expected a string, got {value!r}")
        return value
    raise SettingsError(f"{where}: unsupported setting type {hint!r}")


MAX_KEEP_JUDGE_S = 86400.0   # the judge service's idle life: a day at most
MAX_TIMEOUT_S = 7 * 86400.0   # [eval]'s timeouts: past this a wait is a hang (and 1e308 overflows the clocks)
PRECISION_POLICIES = ("as-run", "strict")   # [eval] precision (tools/judge/accuracy.py)


@dataclass(frozen=True)
class TrialSettings:
    """[eval]: correctness trials, tolerances, timeouts, sandbox limits."""
    __test__ = False                    # not a pytest class, under its old name either
    trials: int = 5                     # fresh-input trials, each from the secret seed
    init_seed: int = 42                 # KernelBench's weight-init seed (both models)
    atol_fp32: float = 1e-4             # KernelBench tolerances (atol = rtol)
    atol_half: float = 1e-2             # fp16 and bf16
    rel_l2_fp32: float = 1e-3           # ||out-ref|| / ||ref|| ceiling: zeros cannot pass
    rel_l2_half: float = 3e-2
    # float64 outputs: far above any honest float64 kernel's rounding (1e-16 a step), far
    # below float32's (6e-8), so a kernel computing an fp64 problem in fp32 cannot pass
    atol_fp64: float = 1e-9
    rel_l2_fp64: float = 1e-8
    compile_timeout_s: float = 180.0    # import + construct + first forward (Triton JIT)
    run_timeout_s: float = 60.0         # every later request to the worker
    reference_timeout_s: float = 600.0  # the problem's Model: built, or get_inputs + one forward (tools/deadline.py)
    max_output_kib: int = 64            # candidate stdout/stderr kept, per stream
    max_file_mib: int = 512             # RLIMIT_FSIZE in the worker
    cpu_memory_gib: float = 16.0        # RLIMIT_AS in the worker on --device cpu (0: none)
    gpu_cross_compile: bool = True      # on cpu, also compile launched kernels for sm_90
    output_transfer: typing.Literal["auto", "pipe"] = "auto"  # cuda outputs: CUDA IPC where it works
    parallel_compile: int = 4           # candidates in their compile phase at once (tools/judge/)
    profile: typing.Literal["refined", "all", "none"] = "refined"  # who gets the bottleneck summary
    keep_judge_s: float = 300.0         # krefine eval: the judge service's idle life (0: none)
    lean_memory_mib: int = 256          # a trial's inputs+outputs from here: lean session (tools/judge/memory.py)
    # Model and ModelNew as the problem leaves them ("train": a fresh module's training
    # mode, as KernelBench runs them) or both after .eval() (inference semantics)
    module_mode: typing.Literal["train", "eval"] = "train"
    # how exact a candidate must be, the same rule on both sides (tools/judge/accuracy.py):
    # "as-run" = reference, eager and torch.compile with the precision flags as the user has
    # them, a candidate no less accurate than eager; "strict" = TF32 off for all three
    precision: typing.Literal[PRECISION_POLICIES] = "as-run"

    def validate(self) -> str | None:
        if self.trials < 1:
            return "trials must be at least 1"
        tolerances = ("atol_fp32", "atol_half", "rel_l2_fp32", "rel_l2_half", "atol_fp64", "rel_l2_fp64")
        wrong = next((k for k in tolerances if getattr(self, k) < 0), None)
        if wrong is not None:
            return f"{wrong} must be at least 0, got {getattr(self, wrong):g}"
        if not all(0 < t <= MAX_TIMEOUT_S for t in (self.compile_timeout_s, self.run_timeout_s,
                                                    self.reference_timeout_s)):   # nan fails too
            return f"timeouts must be positive and at most {MAX_TIMEOUT_S:g} seconds (7 days)"
        if self.max_output_kib < 1 or not 1 <= self.max_file_mib <= 1 << 30:
            return "max_output_kib must be at least 1 and max_file_mib between 1 and 1073741824 (1 PiB)"
        if not (self.cpu_memory_gib == 0 or 2 <= self.cpu_memory_gib <= 1 << 20):
            return "cpu_memory_gib must be 0 (no limit) or between 2 (torch's imports) and 1048576"
        if not -(1 << 63) <= self.init_seed < 1 << 63:
            return "init_seed must fit in 64 bits (torch.manual_seed)"
        if self.parallel_compile < 1:
            return "parallel_compile must be at least 1"
        if self.lean_memory_mib < 0:
            return "lean_memory_mib must be at least 0"
        if not 0 <= self.keep_judge_s <= MAX_KEEP_JUDGE_S:
            return f"keep_judge_s must be between 0 and {MAX_KEEP_JUDGE_S:g} seconds"
        return None


@dataclass(frozen=True)
class TimingSettings:
    """[timing]: how the candidate and the baselines are timed on the GPU."""
    warmup: int = 10                    # untimed calls before the first round
    rounds: int = 5                     # interleaved rounds: eager, candidate, compile
    iters_per_round: int = 20           # timed calls per round, each after an L2 flush
    compile_baseline: bool = True       # also time torch.compile(Model)
    fresh_inputs: bool = False          # every per-call sample on a new set of inputs, every callable alike
    excessive_speedup: float = 10.0     # speedups above this are flagged, not trusted
    host_check_iters: int = 20          # back-to-back calls for the judge's wall-clock check
    host_check_ratio: float = 2.0       # flag when wall/call > ratio*median + slack
    host_check_slack_ms: float = 0.1
    roofline_floor_ratio: float = 0.8   # flag a time below this fraction of the roofline minimum
    # the measure the speedup uses (tools/perf/timer.py); per-call figures are always taken too
    measure: typing.Literal["auto", "per_call", "cuda_graph", "batched"] = "auto"
    per_call_min_ms: float = 1.0        # auto: below this per-call median, graph replay (else batched)
    replay_target_ms: float = 1.0       # one graph replay / batched sample lasts at least this
    confidence: float = 0.90            # two-sided confidence of the speedup interval (tools/perf/speedup.py)
    # more rounds, `rounds` at a time, while the interval over eager is wider than this
    # (high / low - 1), up to max_rounds and max_extra_s of extra timing
    interval_target: float = 0.02
    max_rounds: int = 25
    max_extra_s: float = 6.0

    def validate(self) -> str | None:
        if self.rounds < 1 or self.iters_per_round < 1:
            return "rounds and iters_per_round must be at least 1"
        if self.warmup < 0 or self.host_check_iters < 1:
            return "warmup must be at least 0 and host_check_iters at least 1"
        if min(self.excessive_speedup, self.host_check_ratio) <= 0 or self.host_check_slack_ms < 0 \
                or self.roofline_floor_ratio < 0:
            return ("excessive_speedup and host_check_ratio must be positive; host_check_slack_ms and "
                    "roofline_floor_ratio at least 0")
        if self.max_rounds < self.rounds or self.interval_target < 0 or self.max_extra_s < 0:
            return "max_rounds must be at least rounds; interval_target and max_extra_s at least 0"
        if not 0 < self.confidence < 1:
            return "confidence must be between 0 and 1"
        if self.per_call_min_ms < 0 or self.replay_target_ms <= 0:
            return "per_call_min_ms must be at least 0 and replay_target_ms positive"
        return None


@dataclass(frozen=True)
class GuardSettings:
    """[guards]: what the static and runtime guards allow."""
    allow_library_ops: bool = False     # torch compute ops (matmul, conv, F.*) in the forward path
    max_library_time_share: float = 0.5 # runtime: non-Triton compute share of GPU time
    require_triton_launch: bool = True  # runtime: the forward must launch a Triton kernel
    gpu_ground_truth: bool = True       # cuda: CUPTI's record of kernels and copies (tools/judge/ground_truth.py)


@dataclass(frozen=True)
class EvalSettings:
    test: TrialSettings = field(default_factory=TrialSettings)
    timing: TimingSettings = field(default_factory=TimingSettings)
    guards: GuardSettings = field(default_factory=GuardSettings)


def eval_settings_from_toml(doc: dict, where: str = "agent.toml") -> EvalSettings:
    """Pick the evaluator's tables out of a parsed agent.toml."""
    return EvalSettings(
        test=build(TrialSettings, doc.get("eval"), f"{where} [eval]"),
        timing=build(TimingSettings, doc.get("timing"), f"{where} [timing]"),
        guards=build(GuardSettings, doc.get("guards"), f"{where} [guards]"),
    )
