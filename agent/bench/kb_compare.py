"""KernelBench's verdicts beside krefine's: agreement, the speedup ratio, and why they differ.

Plain functions over the records agent/bench/kb_harness.py writes, one per evaluation
(a problem's seed or best):

  {"problem", "kind": "seed"|"portfolio"|"best", "candidate", "features": [...], "same_reference": bool,
   "krefine": {"verdict", "correct", "speedup_eager", "reason", "diagnostics": [kind, ...], "patterns": [...]},
   "kb": {"status": "ok"|"timeout"|"crashed"|"no_result", "compiled", "correctness",
          "runtime_ms", "ref_ms", "speedup", "error_name", "error", "max_difference": [...],
          "strict_fp32": {"correctness", ...}|None, "static_errors": [...],
          "float64": {"ref_err", "kernel_err", "ref_passes", "ref_as_run_err": [...], "error"}|None}}

kb_features.features(ref_src): what in a reference can make two sound judges disagree. `explain(rec, peers)`:
one line for a record whose correctness verdicts differ, by the rules in RULES order, each
from evidence in the record (or, for a TF32 kernel, in the same problem's exact-fp32 peer);
"unexplained" when none applies (never a guess).
`summary(recs)`: the share that agree, and the ratio KernelBench speedup / krefine speedup over the
records both call correct. `markdown(recs)`: the table, the summary and the disagreements. Only a
record whose KernelBench evaluation gave a verdict ("ok") counts; the others are listed apart.
Imports only the standard library; runs nothing.
"""
from __future__ import annotations

import re
import statistics

UNEXPLAINED = "unexplained"
# KernelBench's "Output mismatch" within TF32's error, when no strict-fp32 recheck ran:
# TF32 keeps a 10-bit mantissa, ~5e-4 relative error a product, up to ~1e-3 over a reduction
TF32_MAX_DIFF = 2e-3
TF32_MARGIN = 1.5   # krefine's as-run rule: up to this times eager's own error (accuracy.py EAGER_ERROR_MARGIN; tested equal)
TF32_CONV = ("KernelBench's reference runs cuDNN convolutions in TF32 (torch's default), outside its own "
             "fp32 tolerance of the exact result; krefine judges a kernel against exact fp32 or a float64 forward")
KINDS = ("seed", "portfolio", "best")


def has_verdict(rec: dict) -> bool:
    return rec["kb"].get("status") == "ok"


def agrees(rec: dict) -> bool:
    return bool(rec["krefine"]["correct"]) == bool(rec["kb"]["correctness"])


def speedup_ratio(rec: dict) -> float | None:
    """KernelBench's speedup over krefine's (both over eager), when both are correct and timed."""
    kb, kr = rec["kb"].get("speedup"), rec["krefine"].get("speedup_eager")
    if not (has_verdict(rec) and agrees(rec) and rec["krefine"]["correct"]) or not kb or not kr:
        return None
    return kb / kr


# ---------------------------------------------------------------- explanations

def _other_reference(rec):
    if rec.get("same_reference") is False:
        return "krefine judged another text of the problem than the level dir's file KernelBench got"
    return None


def _import_error(rec):
    kb = rec["kb"]
    if not rec["krefine"]["correct"] or kb.get("compiled"):
        return None
    if re.search(r"(ModuleNotFoundError|ImportError)\b", f"{kb.get('error_name')} {kb.get('error')}"):
        return f"the file does not import outside krefine ({kb.get('error')})"
    return None


def _float_cast(rec):
    """KernelBench's eval casts every input tensor to its `precision` (fp32), integer ones too."""
    kb = rec["kb"]
    # an op of the reference refusing a float tensor wanted an integer one: krefine, which
    # casts nothing, ran the same reference
    if rec["krefine"]["correct"] and re.search(r"not implemented for '(Float|Half|BFloat16)'", f"{kb.get('error')}"):
        return ("KernelBench casts every input to its precision (fp32), the integer inputs too, so its own "
                f"reference cannot run on them ({kb.get('error')})")
    return None


def _out_of_memory(rec):
    if "out of memory" in (rec["kb"].get("error") or "").lower():
        return ("KernelBench ran out of GPU memory (reference, candidate and their outputs in one "
                "process): no verdict on the kernel")
    return None


def _stochastic(rec):
    if (rec["kb"].get("strict_fp32") or {}).get("correctness"):
        return None         # KernelBench's own check passed with TF32 off: _tf32 has the evidence
    # the source reading random (a Dropout's rate in a variable) counts only where krefine's verdict is not correct,
    # which means its judge called the reference again, the RNG seeded otherwise, and got the same outputs
    if "stochastic_reference" in rec["krefine"].get("diagnostics", []) or (
            "stochastic" in rec.get("features", []) and not rec["krefine"]["correct"]):
        return ("stochastic reference (Dropout or a random draw in forward): no kernel can match its draws, "
                "so either verdict is chance")
    return None


def _tf32(rec):
    kb = rec["kb"]
    if not rec["krefine"]["correct"] or not str(kb.get("error") or "").startswith("Output mismatch"):
        return None
    strict = kb.get("strict_fp32") or {}
    if strict.get("correctness"):
        if "conv" in rec.get("features", []):
            return TF32_CONV + "; with TF32 off KernelBench's own check passes"
        return ("KernelBench's reference computes in TF32; with TF32 off (cuDNN, cuBLAS) "
                "KernelBench's own check passes")
    diffs = kb.get("max_difference") or []
    if strict.get("correctness") is None and "conv" in rec.get("features", []) and diffs \
            and max(diffs) < TF32_MAX_DIFF:
        return TF32_CONV + f" (max difference {max(diffs):.2g} < {TF32_MAX_DIFF:g}; not rechecked)"
    return None


def _reference_error(rec):
    """KernelBench's check failed with TF32 off as well, but its reference under torch's
    default flags is further from that strict-fp32 run than the kernel is. Per trial (the
    same seeds, so the same inputs), |ref - strict ref| >= |kernel - ref| - |kernel - strict
    ref|: the largest such bound against the kernel's largest difference."""
    kb = rec["kb"]
    strict = kb.get("strict_fp32") or {}
    as_run, exact = kb.get("max_difference") or [], strict.get("max_difference") or []
    if not rec["krefine"]["correct"] or strict.get("correctness") is not False or not exact \
            or len(as_run) != len(exact):
        return None
    bound, off = max(a - e for a, e in zip(as_run, exact)), max(exact)
    if bound <= off:
        return None
    return (f"KernelBench's fp32 tolerance is tighter than its own reference's error: with torch's default "
            f"flags (cuDNN's TF32) its reference is at least {bound:.2g} off its strict-fp32 run, the kernel "
            f"{off:.2g}: the kernel is the closer of the two")


def _tf32_kernel(rec, peers=()):
    """A kernel that convolves in TF32 (the as-run policy's `+tf32conv`) fails KernelBench's
    check both ways: two TF32 results differ by rounding, and so does TF32 from exact fp32.
    The evidence is a peer: the same problem's exact-fp32 entry that passes KernelBench's
    strict check, whose as-run difference (the same seeded trials) is KernelBench's own
    reference's TF32 error. Explained when, trial by trial, the kernel is no further from the
    strict-fp32 reference than that, within krefine's as-run margin."""
    kb = rec["kb"]
    strict = kb.get("strict_fp32") or {}
    mine = strict.get("max_difference") or []
    if not rec["krefine"]["correct"] or "conv" not in rec.get("features", []) \
            or not str(kb.get("error") or "").startswith("Output mismatch") \
            or strict.get("correctness") is not False or not mine:
        return None
    for peer in peers:
        p_kb = peer.get("kb") or {}
        ref_err = p_kb.get("max_difference") or []
        if _same_problem(peer, rec) and (p_kb.get("strict_fp32") or {}).get("correctness") \
                and len(ref_err) == len(mine) and str(p_kb.get("error") or "").startswith("Output mismatch") \
                and all(k <= TF32_MARGIN * r for k, r in zip(mine, ref_err)):
            return (f"the kernel convolves in TF32, as KernelBench's reference does (torch's default): it is "
                    f"{max(mine):.2g} off KernelBench's strict-fp32 reference, and KernelBench's own reference is "
                    f"{max(ref_err):.2g} off the {peer['kind']}, an exact-fp32 kernel its strict check passes (same "
                    f"trials); KernelBench's fixed fp32 tolerance refuses two TF32 results that differ by rounding, "
                    f"krefine's as-run rule accepts up to {TF32_MARGIN:g}x eager's own error")
    return _tf32_kernel_float64(rec, peers)


def _same_problem(peer, rec) -> bool:   # another correct entry of the problem, on the same reference
    return peer is not rec and peer.get("problem") == rec["problem"] and peer.get("setting") == rec.get("setting") \
        and peer.get("same_reference") is not False and bool(peer["krefine"]["correct"])


def _tf32_kernel_float64(rec, peers):
    """The same from the float64 forward (kb_eval.float64_check): per trial KernelBench's TF32
    reference is at least |reference - peer| - |peer - float64| off float64 (any entry of the
    problem bounds it); explained when the kernel is within the margin times that bound."""
    mine = ((rec["kb"].get("float64") or {}).get("kernel_err")) or []
    for peer in peers:
        p_kb = peer.get("kb") or {}
        as_run, p_f64 = p_kb.get("max_difference") or [], (p_kb.get("float64") or {}).get("kernel_err") or []
        bound = [a - e for a, e in zip(as_run, p_f64)]
        if _same_problem(peer, rec) and mine and len(as_run) == len(p_f64) == len(mine) \
                and all(b > 0 and k <= TF32_MARGIN * b for k, b in zip(mine, bound)):
            return (f"the kernel convolves in TF32, as KernelBench's reference does (torch's default): it is "
                    f"{max(mine):.2g} off a float64 forward of the reference, and KernelBench's own reference is at "
                    f"least {max(bound):.2g} off it (its difference from the {peer['kind']} less that kernel's own "
                    f"float64 error; same trials), within krefine's as-run margin of {TF32_MARGIN:g}x on every trial")
    return None


def _ill_conditioned(rec):
    """KernelBench's check fails with TF32 off too, and its own reference fails the same fp32
    tolerance against a float64 forward of itself (kb_eval.float64_check, same trials): two
    sound fp32 orderings differ by more. Explained when, trial by trial, the kernel is no
    further from float64 than krefine's as-run margin times the reference's own error."""
    kb = rec["kb"]
    f64 = kb.get("float64") or {}
    ref_err, mine, passes = f64.get("ref_err") or [], f64.get("kernel_err") or [], f64.get("ref_passes") or []
    if not rec["krefine"]["correct"] or not str(kb.get("error") or "").startswith("Output mismatch") \
            or (kb.get("strict_fp32") or {}).get("correctness") is not False or not mine \
            or not len(ref_err) == len(mine) == len(passes) or all(passes):
        return None
    if not all(k <= TF32_MARGIN * r for k, r in zip(mine, ref_err)):
        return None
    return (f"KernelBench's fp32 tolerance is tighter than the problem's fp32 error: its own reference (TF32 "
            f"off) is up to {max(ref_err):.2g} off a float64 forward of itself and fails that tolerance against "
            f"it on {passes.count(False)} of {len(passes)} trials; the kernel is {max(mine):.2g} off it, within "
            f"krefine's {TF32_MARGIN:g}x of the reference's own error on every trial")


def _as_run_reference(rec):
    """The same float64 forward beside KernelBench's reference as its eval runs it (torch's default
    flags: cuDNN's TF32), the error krefine's as-run rule allows its margin of: explained when,
    trial by trial, the kernel is no further from float64 than that margin times it."""
    kb = rec["kb"]
    f64 = kb.get("float64") or {}
    as_run, mine = f64.get("ref_as_run_err") or [], f64.get("kernel_err") or []
    if not rec["krefine"]["correct"] or not str(kb.get("error") or "").startswith("Output mismatch") \
            or not mine or len(as_run) != len(mine) or not all(k <= TF32_MARGIN * r for k, r in zip(mine, as_run)):
        return None
    return (f"KernelBench's own reference, run as its eval runs it (torch's default flags, cuDNN's TF32), is up to "
            f"{max(as_run):.2g} off a float64 forward; the kernel is {max(mine):.2g} off it, within krefine's "
            f"as-run margin of {TF32_MARGIN:g}x that reference's error on every trial")


def _krefine_reason(rec):
    kr = rec["krefine"]
    if kr["correct"] or not rec["kb"].get("correctness"):
        return None
    reason = kr.get("reason") or ""
    kinds = kr.get("diagnostics") or []
    if not reason:
        return None
    if kinds and kinds[0] == "mismatch" and "rel_l2" in kr.get("patterns", []):   # tagged only when no element is off
        return (f"krefine's relative-L2 limit (every element within KernelBench's tolerance, the error's "
                f"norm is not; near-zero outputs cannot pass as zeros): {reason}")
    if kinds and kinds[0] == "mismatch" and "reduced_precision" in kr.get("patterns", []) \
            and "conv" in rec.get("features", []):
        return (f"the kernel computes at TF32-like precision, as KernelBench's cuDNN reference does (torch's "
                f"default); krefine's strict-fp32 reference is the exact one: {reason}")
    if kinds and kinds[0].startswith("guard:"):
        return f"krefine's guard {kinds[0].removeprefix('guard:')} rejected it: {reason}"
    return f"krefine {kr['verdict']}: {reason}"


RULES = (_other_reference, _import_error, _float_cast, _out_of_memory, _stochastic, _tf32, _reference_error,
         _tf32_kernel, _ill_conditioned, _as_run_reference, _krefine_reason)
_PEER_RULES = (_tf32_kernel,)   # these also read the same problem's other records


def explain(rec: dict, peers: list[dict] = ()) -> str:
    """Why the two correctness verdicts differ, from the first rule that the evidence fits;
    "" when they agree (or KernelBench gave none). `peers`: other records (any problem), which
    some rules read for the same problem's evidence."""
    if not has_verdict(rec) or agrees(rec):
        return ""
    for rule in RULES:
        why = rule(rec, [p for p in peers if has_verdict(p)]) if rule in _PEER_RULES else rule(rec)
        if why:
            return why
    return UNEXPLAINED


# ---------------------------------------------------------------- figures

def summary(recs: list[dict], peers: list[dict] | None = None) -> dict:
    """`peers`: the records explain() may read beside these (default: these)."""
    peers = recs if peers is None else peers
    judged = [r for r in recs if has_verdict(r)]
    agreed = [r for r in judged if agrees(r)]
    ratios = sorted(x for x in map(speedup_ratio, judged) if x is not None)
    differ = [r for r in judged if not agrees(r)]
    return {"evaluations": len(recs), "kb_verdicts": len(judged), "agree": len(agreed),
            "agree_share": len(agreed) / len(judged) if judged else None,
            "both_correct": sum(1 for r in agreed if r["krefine"]["correct"]),
            "disagree": len(differ), "unexplained": sum(1 for r in differ if explain(r, peers) == UNEXPLAINED),
            "kb_only_correct": sum(1 for r in differ if r["kb"]["correctness"]),
            "krefine_only_correct": sum(1 for r in differ if r["krefine"]["correct"]),
            "static_refused": sum(1 for r in recs if r["kb"].get("static_errors")),
            "ratio": spread(ratios)}


def spread(xs: list[float]) -> dict | None:
    """median, p10, p90, min, max (inclusive deciles) and n; None when empty."""
    if not xs:
        return None
    deciles = statistics.quantiles(xs, n=10, method="inclusive") if len(xs) > 1 else [xs[0]] * 9
    return {"n": len(xs), "median": statistics.median(xs), "p10": deciles[0], "p90": deciles[8],
            "min": min(xs), "max": max(xs)}


TABLE = ("problem", "kind", "krefine", "krefine ×eager", "KernelBench", "KB static", "KB ×eager", "KB / krefine",
         "KB ms", "KB ref ms", "KB error", "explanation")


def markdown(recs: list[dict], title: str = "KernelBench's harness beside krefine") -> str:
    """The per-evaluation table, the summary (all, seeds, bests) and the disagreements, in
    the order given."""
    lines = [f"# {title}", "",
             "krefine: the bench's verdict and speedup over eager (geometric mean of per-round median "
             "ratios, rounds interleaved with eager); KernelBench: "
             "eval_kernel_against_ref in a fresh process (seed 42, 5 correctness trials, 100 perf trials, "
             "cuda_event, fp32, backend triton), speedup = its reference's mean time / the kernel's; "
             "KB static: its kernel_static_checker's strict checks on the file (validate_kernel_static), "
             "which KernelBench's own runs refuse a kernel for.", "",
             "| " + " | ".join(TABLE) + " |", "|" + "|".join("---" for _ in TABLE) + "|"]
    lines += ["| " + " | ".join(_cell(c) for c in _row(r, recs)) + " |" for r in recs]
    lines += ["", "## Summary", "", "| | evaluations | KB verdicts | agree | both correct | only KB correct | "
              "only krefine correct | unexplained | KB static refusals | KB / krefine: median [p10, p90] (min–max, n) |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for label, part in (("all", recs), *((k, [r for r in recs if r["kind"] == k]) for k in KINDS)):
        if part:
            s = summary(part, recs)
            lines.append(f"| {label} | {s['evaluations']} | {s['kb_verdicts']} | {s['agree']} ({_pct(s['agree_share'])}) "
                         f"| {s['both_correct']} | {s['kb_only_correct']} | {s['krefine_only_correct']} | "
                         f"{s['unexplained']} | {s['static_refused']} | {_spread(s['ratio'])} |")
    differ = [r for r in recs if explain(r, recs)]
    lines += ["", f"## Disagreements ({len(differ)})", ""]
    if differ:
        lines += ["| problem | kind | krefine | KernelBench | explanation |", "|---|---|---|---|---|"]
        lines += [f"| {_cell(r['problem'])} | {r['kind']} | {_cell(_krefine(r))} | {_cell(_kb(r))} | "
                  f"{_cell(explain(r, recs))} |" for r in differ]
    missing = [r for r in recs if not has_verdict(r)]
    if missing:
        lines += ["", f"## No KernelBench verdict ({len(missing)})", ""]
        lines += [f"- {r['problem']} {r['kind']}: {r['kb'].get('status')}: {_cell(r['kb'].get('error') or '')}"
                  for r in missing]
    return "\n".join(lines) + "\n"


def _row(r: dict, recs: list[dict]) -> list[str]:
    kb, kr = r["kb"], r["krefine"]
    ratio = speedup_ratio(r)
    static = kb.get("static_errors")
    return [r["problem"], r["kind"], kr["verdict"], _x(kr.get("speedup_eager")), _kb_verdict(kb),
            "—" if static is None else ("; ".join(static) or "pass"), _x(kb.get("speedup")), "—" if ratio is None else f"{ratio:.2f}", _num(kb.get("runtime_ms")),
            _num(kb.get("ref_ms")), kb.get("error") or "", explain(r, recs)]


def _kb_verdict(kb: dict) -> str:
    if kb.get("status") != "ok":
        return f"({kb.get('status')})"
    return "correct" if kb["correctness"] else ("incorrect" if kb["compiled"] else "not compiled")


def _krefine(r: dict) -> str:
    kr = r["krefine"]
    return kr["verdict"] + (f": {kr['reason']}" if kr.get("reason") and not kr["correct"] else "")


def _kb(r: dict) -> str:
    kb = r["kb"]
    return _kb_verdict(kb) + (f": {kb['error']}" if kb.get("error") else "")


def _x(v) -> str:
    return "—" if v is None else f"{v:.2f}×"


def _num(v) -> str:
    return "—" if v is None else f"{v:.3g}"


def _pct(v) -> str:
    return "—" if v is None else f"{v:.0%}"


def _spread(s: dict | None) -> str:
    if s is None:
        return "—"
    return f"{s['median']:.2f} [{s['p10']:.2f}, {s['p90']:.2f}] ({s['min']:.2f}–{s['max']:.2f}, n={s['n']})"


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")
