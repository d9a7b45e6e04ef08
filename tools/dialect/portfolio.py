"""The seed portfolio: every Inductor seed of a problem, each from one configuration.

A run's seed (tools/dialect/kernelbook.py `seed_candidate`) is one candidate: the first
compile whose conversion the static guards accept. `seed_portfolio` keeps each
configuration's own result as a `PortfolioEntry` (label, portable code or the reason
there is none):

  "default"            torch.compile as it is;
  "templates"          (cuda) Inductor's Triton templates for GEMMs and convolutions
                       (max-autotune), compiled only when the default leaves a library
                       call for them to replace or gives no seed;
  "<label>+tf32x3"     that seed with its exact-fp32 `tl.dot`s computed as three TF32
                       products (tools/precision.py `with_dot_precision`; the convolution
                       family's launches by their `precision=` argument), only where it
                       has such dots. Nothing else in the file changes: whether it meets
                       the problem's tolerance is the judge's to say. (So the guards'
                       verdict on the seed holds for it; a variant that differs in more
                       is read by them again.)
  "<label>+tf32conv"   (cuda) the tf32x3 variant with the convolution family's launches at
                       "tf32" instead (operands rounded to TF32, one product: as cuDNN
                       convolves by default, PyTorch's cudnn.allow_tf32), only where it has
                       such launches. Under [eval] precision "as-run" eager convolves in
                       TF32, and the judge holds the entry to eager's accuracy; under
                       "strict" it cannot pass, and the run leaves it out (agent/loop/graph.py).

A compile whose library convolutions (`extern_kernels.convolution`) the conversion gave
to krefine's own family (tools/kernels/conv.py) says so in its label, with the members
its launches name: "default+conv(igemm)", "default+conv(phases)+tf32x3"; one whose library
matrix products went to krefine's GEMM family (tools/kernels/gemm.py), "+gemm"; one whose
library attention (flash / efficient / cuDNN, from F.scaled_dot_product_attention or
nn.MultiheadAttention) went to krefine's attention family (tools/kernels/attention.py), "+attn"
(the templates compile then runs too: it writes attention as matmuls and a softmax); one with
nn.LSTM / GRU / RNN in krefine's recurrent family, "+rnn"; one with top-k or sort in its
selection family, "+select"; one with nn.EmbeddingBag or torch.cdist in its lookup family,
"+lookup"; one with a cpu scatter in its scatter family, "+scatter".

The entry `seed_candidate` returns comes first (default when accepted, else templates),
then the other compile, then the tf32x3 variants in the same order, then the tf32conv
ones; a code equal byte for byte to an earlier entry's is left out. A configuration that
fails is an entry with its reason and stops none of the others.

`cached_portfolio` keeps it in the seed cache (tools/dialect/seedcache.py, beside the
seed and the captures it reuses); `portfolio_in_subprocess` is how the agent gets one
(the cache in its own process, else `python -m tools.dialect portfolio`). Judging the
entries and choosing among them is not done here.
"""
from __future__ import annotations

import functools
import json
import math
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from tools.dialect.inductor_capture import Capture, capture
from tools.dialect.kernelbook import accepted_seed, guard_rejection
from tools.dialect.seedcache import SeedCache, cached_or_child, lasting, problem_file, torch_version
from tools.precision import with_dot_precision

PRECISION = "tf32x3"
CONV_TF32 = "tf32conv"      # the label of the variant whose convolutions are TF32 (cuda only)
SAME_AS_DEFAULT = "same as default: no library GEMM/convolution to replace"
# a call the templates would replace: extern_kernels.mm(...), .convolution(...), ..., and a Linear
# and its ReLU as one op (tools/dialect/gemm_epilogue.py), which they write as a fused template
_LIBRARY_CALL = re.compile(r"\bextern_kernels\.\w+\(|\btorch\.ops\.krefine\.addmm_act\.default\(")
FILE_NAME = "portfolio.json"
# call()'s launches of krefine's convolution family (tools/dialect/kernelbook.py writes them)
_CONV_CALL = re.compile(r"= conv(?:_transpose)?_nd\(")
_CONV_TF32X3 = re.compile(r"(= conv(?:_transpose)?_nd\(.*\bprecision=)'tf32x3'")
_CONV_MEMBER = re.compile(r"= conv(?:_transpose)?_nd\(.*\bmember='(\w+)'")
_CONV_PRECISION = re.compile(r"(= conv(?:_transpose)?_nd\(.*\bprecision=)'ieee'")
# call()'s launches of krefine's GEMM family (library matrix products; kernelbook.py writes them)
# (`gemm(a, b, out=buf, ...)`, or `buf = gemm(a, b, bias=.., act='relu', ...)` for a Linear and its ReLU)
_GEMM_CALL = re.compile(r"^\s*(?:\w+ = )?gemm\(", re.M)
_GEMM_PRECISION = re.compile(r"^(\s*(?:\w+ = )?gemm\(.*\bprecision=)'ieee'", re.M)
# call()'s launches of krefine's attention family (library attention ops; kernelbook.py writes them)
_ATTN_CALL = re.compile(r"= sdpa\(")
_ATTN_PRECISION = re.compile(r"(= sdpa\(.*\bprecision=)'ieee'")
# call()'s launches of krefine's recurrent and selection families (kernelbook.py writes them)
_RNN_CALL = re.compile(r"= rnn_seq\(")
_RNN_PRECISION = re.compile(r"(= rnn_seq\(.*\bprecision=)'ieee'")
_SELECT_CALL = re.compile(r"= (?:topk|sort)_op\(")
_LOOKUP_CALL = re.compile(r"= (?:embedding_bag|cdist)_op\(")
_SCATTER_CALL = re.compile(r"^\s*scatter_reduce_op_\(", re.M)
# a library attention op Inductor leaves (flash / efficient / cuDNN): the templates compile
# writes attention as matmuls and a softmax instead
_LIBRARY_ATTENTION = re.compile(r"\btorch\.ops\.aten\._scaled_dot_product_\w+\.default\(")


@dataclass(frozen=True)
class PortfolioEntry:
    label: str              # the configuration: "default", "templates", "default+tf32x3", "default+conv(igemm)", ...
    code: str | None        # portable KernelBook source the static guards accept; None: none
    reason: str = ""        # why there is no code ("" when there is)


def seed_portfolio(problem, device: str, capture_fn=None, on_progress=None) -> list[PortfolioEntry]:
    """The seed portfolio of `problem` (tools.problem.Problem) on `device` (see the module
    docstring). `capture_fn(problem, device, templates=...)` records a compile, as for
    `seed_candidate`. `on_progress(entries, pending)`, when given, hears the portfolio so
    far and the configurations still to compile after each compile but the last (a
    budget that runs out later keeps them: `partial_portfolio`). Raises only on our own bugs."""
    capture_fn = capture_fn or capture
    # 1) the default compile
    default, cap = _configuration(problem, "default", lambda: capture_fn(problem, device, templates=False))
    configs = [default]
    # 2) on cuda, Inductor's Triton templates; a default seed with no library call leaves
    #    them nothing to replace (the same code). A default with no seed at all is compiled
    #    again, as seed_candidate does: the templates compile also runs attention as matmuls
    if device == "cuda":
        if default.code is not None and not _LIBRARY_CALL.search(cap.code) \
                and not _LIBRARY_ATTENTION.search(cap.code):
            configs.append(PortfolioEntry("templates", None, SAME_AS_DEFAULT))
        else:
            if on_progress is not None:
                on_progress(_ordered(list(configs), device), ["templates"])
            configs.append(_configuration(problem, "templates",
                                          lambda: capture_fn(problem, device, templates=True))[0])
    return _ordered(configs, device)


def _ordered(configs: list[PortfolioEntry], device: str = "cpu") -> list[PortfolioEntry]:
    """The compiles' entries in the portfolio's order, with their tf32x3 variants (and on
    cuda their tf32conv ones), each code once."""
    # 3) seed_candidate's seed first (stable: default before templates when both or neither)
    configs.sort(key=lambda e: e.code is None)
    # 4) each seed with its exact-fp32 dots at tf32x3; on cuda, its convolutions at TF32 too
    made = [_variants(e.label, e.code, device) for e in configs if e.code is not None]
    variants = [v for v, _ in made if v is not None] + [v for _, v in made if v is not None]
    # 5) one entry per code
    seen: set[str] = set()
    out = []
    for entry in configs + variants:
        if entry.code is None or entry.code not in seen:
            out.append(entry)
        if entry.code is not None:
            seen.add(entry.code)
    return out


def _configuration(problem, label: str, get) -> tuple[PortfolioEntry, Capture | None]:
    """One compile converted: its entry, and the Capture (None when the compile failed)."""
    try:
        cap = get()
    except ValueError as e:
        return PortfolioEntry(label, None, str(e)), None
    try:
        code = accepted_seed(problem, cap)
    except ValueError as e:
        return PortfolioEntry(label, None, str(e)), cap
    members = list(dict.fromkeys(_CONV_MEMBER.findall(code)))
    if _CONV_CALL.search(code):     # library convolutions replaced by krefine's family
        label = f"{label}+conv({','.join(members)})" if members else f"{label}+conv"
    if _GEMM_CALL.search(code):     # library matrix products replaced by krefine's GEMM family
        label = f"{label}+gemm"
    if _ATTN_CALL.search(code):     # library attention replaced by krefine's attention family
        label = f"{label}+attn"
    if _RNN_CALL.search(code):      # nn.LSTM / GRU / RNN as krefine's recurrent family
        label = f"{label}+rnn"
    if _SELECT_CALL.search(code):   # aten.topk / sort fallbacks as krefine's selection family
        label = f"{label}+select"
    if _LOOKUP_CALL.search(code):   # aten._embedding_bag / _cdist_forward as krefine's lookup family
        label = f"{label}+lookup"
    if _SCATTER_CALL.search(code):  # aten.scatter_reduce_ (cpu) as krefine's scatter family
        label = f"{label}+scatter"
    return PortfolioEntry(label, code), cap


@functools.lru_cache(maxsize=8)
def _variants(label: str, code: str, device: str) -> tuple[PortfolioEntry | None, PortfolioEntry | None]:
    """An accepted entry's tf32x3 variant and, on cuda, its tf32conv one (None: none), each made once: the
    portfolio kept while the templates compile runs and the whole one share them."""
    entry = PortfolioEntry(label, code)
    base = _precision_variant(entry)
    return base, _conv_tf32_variant(entry, base) if device == "cuda" else None


# a dot's or a family launch's precision keyword, with the values a variant writes
_PRECISION_KW = re.compile(r"""(,\s*(?:allow_tf32|input_precision)\s*=\s*(?:True|False|(["'])(?:ieee|tf32|tf32x3)\2))"""
                           r"""|\bprecision\s*=\s*'(?:ieee|tf32|tf32x3)'""")


def _guarded(entry: PortfolioEntry, code: str) -> str | None:
    """The guards' rejection of `code`, a variant of the accepted `entry`: none where the two differ in
    precision keywords alone (ieee, tf32, tf32x3: no guard rejects one), which on a 1.3 MB seed (DenseNet201)
    spares a guard pass of 15-30 s a variant; else the guards read it."""
    def bare(text):
        return _PRECISION_KW.sub(lambda m: "" if m.group(1) else "precision=_", text)
    return None if bare(code) == bare(entry.code) else guard_rejection(code)


def _precision_variant(entry: PortfolioEntry) -> PortfolioEntry | None:
    code = with_dot_precision(entry.code, PRECISION) or entry.code
    code = _CONV_PRECISION.sub(rf"\1'{PRECISION}'", code)
    code = _GEMM_PRECISION.sub(rf"\1'{PRECISION}'", code)
    code = _ATTN_PRECISION.sub(rf"\1'{PRECISION}'", code)
    code = _RNN_PRECISION.sub(rf"\1'{PRECISION}'", code)
    if code == entry.code:
        return None                 # no exact-fp32 dot: nothing to vary
    label = f"{entry.label}+{PRECISION}"
    rejected = _guarded(entry, code)
    return PortfolioEntry(label, code) if rejected is None else \
        PortfolioEntry(label, None, f"the guards would reject it ({rejected})")


_MADE = object()


def _conv_tf32_variant(entry: PortfolioEntry, base=_MADE) -> PortfolioEntry | None:
    """`entry`'s tf32x3 variant (`base`, where made already) with its convolution launches at "tf32"; None
    without any."""
    if not _CONV_CALL.search(entry.code):
        return None
    base = _precision_variant(entry) if base is _MADE else base
    code = _CONV_PRECISION.sub(r"\1'tf32'", entry.code)
    if base is not None and base.code is not None:
        code = _CONV_TF32X3.sub(r"\1'tf32'", base.code)
    label = f"{entry.label}+{CONV_TF32}"
    if code == entry.code:
        return None
    rejected = _guarded(entry, code)
    return PortfolioEntry(label, code) if rejected is None else \
        PortfolioEntry(label, None, f"the guards would reject it ({rejected})")


def entries_json(entries: list[PortfolioEntry]) -> str:
    """The portfolio's JSON: [{"label", "code", "reason"}, ...] in the portfolio's order."""
    return json.dumps([asdict(e) for e in entries], indent=1) + "\n"


def read_entries(text: str) -> list[PortfolioEntry]:
    return [PortfolioEntry(d["label"], d.get("code"), d.get("reason", "")) for d in json.loads(text)]


PARTIAL_FILE = "portfolio.partial.json"


def partial_json(entries: list[PortfolioEntry], pending: list[str]) -> str:
    """What a portfolio child keeps while it compiles (PARTIAL_FILE): the entries so far
    and the configurations still to come."""
    return json.dumps({"entries": [asdict(e) for e in entries], "pending": pending}, indent=1) + "\n"


def partial_portfolio(text: str, timeout_s: float, templates_s: float = 0.0) -> list[PortfolioEntry] | None:
    """A child's PARTIAL_FILE, read after its budget ran out (`templates_s`: the templates
    compile's own budget, where that one did): the entries it finished, then one entry per
    configuration it did not, saying so; None when none it finished has a seed (the budget
    then leaves no seed, as before)."""
    try:
        got = json.loads(text)
        done = read_entries(json.dumps(got["entries"]))
        pending = [str(p) for p in got["pending"]]
    except (ValueError, KeyError, TypeError):
        return None
    if not any(e.code is not None for e in done):
        return None
    why = (f"dropped: the seed portfolio ran past its {timeout_s:.0f} s budget ([search] seed_timeout_s) "
           "while this configuration compiled; the ones before it are kept")
    if templates_s:
        why = (f"dropped: the templates compile ran past its own {templates_s:.0f} s budget ([search] "
               "templates_timeout_s); the configurations before it are kept")
    return done + [PortfolioEntry(label, None, why) for label in pending]


def no_portfolio(entries: list[PortfolioEntry]) -> str | None:
    """Every entry's reason on one line when none has code, once per reason (`default, templates:
    REASON` where both failed alike); None when one has."""
    if any(e.code is not None for e in entries):
        return None
    labels: dict[str, list[str]] = {}
    for e in entries:
        labels.setdefault(e.reason, []).append(e.label)
    return "; ".join(f"{', '.join(names)}: {reason}" for reason, names in labels.items()) or "no configuration"


def cached_portfolio(problem, device: str, cache_dir: str | Path | None,
                     module_mode: str = "train", on_progress=None) -> list[PortfolioEntry]:
    """seed_portfolio of the `module_mode` forward through the seed cache at `cache_dir`
    (None or "": no cache): a kept portfolio, else one converted from kept captures, else
    compiled. It is kept unless an entry failed in a way another try may not repeat; the
    seed cache gets its seed too (its first entry), when it has none."""
    if not cache_dir:
        return seed_portfolio(problem, device, capture_fn=lambda p, d, templates: capture(
            p, d, templates=templates, module_mode=module_mode), on_progress=on_progress)
    import torch
    cache, version = SeedCache(cache_dir, module_mode), torch.__version__
    try:    # a kept timeout is tried again: the caller that set the limit came here
        return read_entries(cache.get_portfolio(problem, device, version, math.inf))
    except KeyError:
        pass
    import time
    t0 = time.monotonic()
    entries = seed_portfolio(problem, device,
                             capture_fn=lambda p, d, templates: cache.capture(p, d, version, templates),
                             on_progress=on_progress)
    if all(lasting(e.reason) for e in entries):
        cache.put_portfolio(problem, device, version, entries_json(entries), seconds=time.monotonic() - t0)
    try:
        cache.get(problem, device, version, math.inf)
    except KeyError:        # the seed is the first entry: seed_candidate's
        seed = entries[0].code if entries else None
        cache.put(problem, device, version, seed, no_portfolio(entries) or "")
    except ValueError:
        pass                # its reason for no seed is kept
    return entries


def portfolio_in_subprocess(problem_path: str | Path, device: str, timeout_s: float,
                            cache_dir: str | Path | None = None, env: dict[str, str] | None = None,
                            module_mode: str = "train", templates_s: float = 0.0) -> list[PortfolioEntry]:
    """The seed portfolio of the problem at `problem_path` (its `module_mode` forward), as
    `seed_in_subprocess` gets a seed: from the seed cache at `cache_dir` in this process
    (no torch import), else from a `python -m tools.dialect portfolio` process with `env`
    added to the agent's environment. ValueError with a one-line reason when no entry has
    code or the child failed. A child past `timeout_s` after a compile that gave a seed
    (the default) leaves the portfolio it finished, the configuration it was compiling named
    as dropped; that portfolio is kept with its budget (a later call under the same budget,
    the run after a bench's seed pass, reads it; one under a longer budget compiles again,
    its finished captures from the cache); one that finished none is cached as a timeout,
    and compiled again only under a longer `timeout_s`. `templates_s` ([search]
    templates_timeout_s; 0: none) ends the child that long after its first configurations
    were written (the default compile's, when the templates compile follows), within
    `timeout_s`; that portfolio is kept with both budgets."""
    seen: list[float] = []          # when the child's first partial portfolio appeared (monotonic)
    t0 = time.monotonic()

    def templates_end(out: Path) -> float | None:
        if not seen and (out / PARTIAL_FILE).exists():
            seen.append(time.monotonic())
        return seen[0] + templates_s if seen else None

    def kept(out: Path) -> str | None:   # a budget ran out: the configurations it finished
        partial = out / PARTIAL_FILE
        cut = templates_s if seen and time.monotonic() >= seen[0] + templates_s else 0.0
        entries = partial_portfolio(partial.read_text(encoding="utf-8"), timeout_s, cut) if partial.exists() else None
        if not entries:
            return None
        text = entries_json(entries)
        if cache_dir:       # kept for these budgets: the run after a bench's seed pass reads it
            SeedCache(cache_dir, module_mode).put_partial_portfolio(   # its seconds: as long as it ran
                problem_file(problem_path), device, torch_version(), text, timeout_s, cut,
                seconds=time.monotonic() - t0 if cut else None)
        return text
    return _some(read_entries(cached_or_child("portfolio", problem_path, device, timeout_s, cache_dir, env,
                                              module_mode, result=FILE_NAME, on_timeout=kept,
                                              deadline=templates_end if templates_s > 0 else None,
                                              cached={"templates_s": templates_s})))


def _some(entries: list[PortfolioEntry]) -> list[PortfolioEntry]:
    reason = no_portfolio(entries)
    if reason is not None:
        raise ValueError(reason)
    return entries
