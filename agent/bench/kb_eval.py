"""KernelBench's own evaluator on one (problem, candidate) pair, as its users run it.

`eval_against_ref` calls kernelbench.eval.eval_kernel_against_ref with the defaults of KernelBench's
scripts/run_and_check.py (seed 42, 5 correctness trials, 100 perf trials, cuda_event
timing, fp32) and backend "triton", catching what escapes it as run_and_check.py does
(compiled false, the error kept), and returns plain JSON values: compiled, correctness,
runtime_ms, ref_ms (the reference timed by eval itself, same timing function, same
process: its excessive-speedup check), speedup = ref_ms / runtime_ms, the error KernelBench
recorded, and evidence for agent/bench/kb_compare.py's explanations: KernelBench's static
checker's findings and, when its check failed on "Output mismatch", the same check run
again with TF32 off for the reference (torch lets cuDNN convolve fp32 in TF32 by default),
and when that fails too, a float64 forward of the reference on the same trials: how far
the reference and the kernel each are from it (`float64_check`).

As a script it is one fresh process per evaluation; agent/bench/kb_harness.py starts it with
`python -P` and krefine off PYTHONPATH, and `hide_krefine` keeps an installed krefine's
packages out of reach, so a candidate that imports krefine fails here as it would for a
KernelBench user:

  python -P agent/bench/kb_eval.py KB_SRC PROBLEM CANDIDATE RESULT_JSON
  python -P agent/bench/kb_eval.py --check KB_SRC     (KernelBench imports, a GPU is there)

The result goes to RESULT_JSON, never to stdout (KernelBench prints freely there). Imports
nothing of krefine. `stub_llm_imports` is shared with benchmarks/judge_throughput.py.
"""
from __future__ import annotations

import contextlib
import importlib.abc
import json
import os
import sys
import time
import types
from pathlib import Path

KREFINE = Path(__file__).resolve().parents[2]

# scripts/run_and_check.py's defaults, and the backend krefine's kernels are written for
SEED = 42
CORRECT_TRIALS = 5
PERF_TRIALS = 100
TIMING = "cuda_event"
BACKEND = "triton"
PRECISION = "fp32"
ERROR_CHARS = 300
# metadata keys that say why KernelBench's verdict is not "correct", most telling first
_ERROR_KEYS = (("compilation_error_name", "compilation_error"), ("runtime_error_name", "runtime_error"),
               (None, "correctness_issue"), (None, "cuda_error"), (None, "other_error"),
               (None, "error_during_performance"))


def stub_llm_imports() -> None:
    """KernelBench's utils import LLM clients (and tqdm) that evaluation never calls."""
    for name in ("dotenv", "openai", "litellm", "tqdm"):
        try:
            __import__(name)
        except ImportError:
            m = types.ModuleType(name)
            m.load_dotenv = lambda *a, **k: None
            m.OpenAI = object
            m.completion = None
            m.tqdm = lambda it=None, *a, **k: it
            sys.modules[name] = m


class _HideKrefine(importlib.abc.MetaPathFinder):
    """krefine's top-level packages (agent, tools, ...) do not import from krefine's checkout:
    a KernelBench user has no krefine, even where this machine has it installed (editable)."""
    names = frozenset(p.parent.name for p in KREFINE.glob("*/__init__.py"))

    def find_spec(self, name, path=None, target=None):
        if name not in self.names:
            return None
        for finder in sys.meta_path:
            spec = finder.find_spec(name, path, target) if finder is not self and hasattr(finder, "find_spec") else None
            if spec is not None:
                where = spec.origin or next(iter(spec.submodule_search_locations or []), "")
                if where and Path(where).resolve().is_relative_to(KREFINE):
                    raise ModuleNotFoundError(f"No module named {name!r} (krefine's, hidden as on a "
                                              "KernelBench user's machine)", name=name)
                return spec
        return None


def hide_krefine() -> None:
    sys.meta_path.insert(0, _HideKrefine())


def import_kernelbench(kb_src: Path):
    """kernelbench.eval from a KernelBench checkout's src/."""
    sys.path.insert(0, str(kb_src))
    stub_llm_imports()
    from kernelbench import eval as kb_eval
    return kb_eval


def eval_against_ref(kb_src: Path, ref_src: str, cand_src: str) -> dict:
    kb = import_kernelbench(kb_src)
    import torch
    from kernelbench.kernel_static_checker import validate_kernel_static
    device = torch.device("cuda:0")   # the harness shows this process its GPU alone
    precision = kb.get_torch_dtype_from_string(PRECISION)
    t0 = time.perf_counter()
    # 1) KernelBench's static checker: evidence only (eval does not run it)
    _, static_errors, static_warnings = validate_kernel_static(cand_src, backend=BACKEND, precision=PRECISION)
    # 2) eval, as run_and_check.py calls it; what escapes it is a compile failure there too
    try:
        res = kb.eval_kernel_against_ref(
            ref_src, cand_src, seed_num=SEED, num_correct_trials=CORRECT_TRIALS, num_perf_trials=PERF_TRIALS,
            measure_performance=True, timing_method=TIMING, device=device, backend=BACKEND, precision=precision)
    except Exception as e:
        key = "cuda_error" if "CUDA error" in str(e) else "other_error"
        res = kb.KernelExecResult(compiled=False, correctness=False, metadata={key: f"{type(e).__name__}: {e}"})
    if res is None:   # eval's "lock file error, please retry"
        return {"status": "no_result", "error": "KernelBench returned no result (a lock or missing-file error "
                                                "while loading the candidate: it asks for a retry)"}
    meta = res.metadata
    runtime, ref = _ms(res.runtime), _ms(res.ref_runtime)
    out = {"status": "ok", "compiled": bool(res.compiled), "correctness": bool(res.correctness),
           "runtime_ms": runtime, "ref_ms": ref,
           "speedup": ref / runtime if res.correctness and runtime and ref else None,
           **_error(meta), "max_difference": [float(x) for x in meta.get("max_difference", [])],
           "trials": meta.get("correctness_trials"), "excessive_speedup": bool(meta.get("excessive_speedup")),
           "hardware": meta.get("hardware"), "static_errors": static_errors, "static_warnings": static_warnings,
           "strict_fp32": None, "float64": None}
    # 3) an output mismatch: the same check with the reference in strict fp32
    if meta.get("correctness_issue") == "Output mismatch":
        out["strict_fp32"] = strict_fp32_check(kb, ref_src, cand_src, device, precision)
        if out["strict_fp32"].get("correctness") is False:
            out["float64"] = float64_check(kb, ref_src, cand_src, device, precision)
    out["wall_s"] = round(time.perf_counter() - t0, 2)
    return out


@contextlib.contextmanager
def _strict_models(kb, ref_src: str, cand_src: str, device, precision):
    """(Model, ModelNew, get_inputs) built as eval builds them, seeded alike, then TF32 off for
    cuDNN and cuBLAS until the block ends; the flags restored and the candidate's temp file
    removed whatever happens."""
    import torch
    flags = torch.backends.cudnn, torch.backends.cuda.matmul
    saved = [f.allow_tf32 for f in flags]
    tmp = None
    try:
        Model, get_init_inputs, get_inputs = kb.load_original_model_and_inputs(ref_src, {})
        kb.set_seed(SEED)
        init = [kb._process_input_tensor(x, device, BACKEND, precision) for x in get_init_inputs()]
        with torch.no_grad():
            kb.set_seed(SEED)
            ref = Model(*init)
            ModelNew, tmp = kb.load_custom_model_with_tempfile(cand_src, entry_point="ModelNew")
            kb.set_seed(SEED)
            new = ModelNew(*init)
        for f in flags:
            f.allow_tf32 = False
        yield ref, new, get_inputs
    finally:
        for f, v in zip(flags, saved):
            f.allow_tf32 = v
        if tmp is not None:
            os.remove(tmp.name)


def strict_fp32_check(kb, ref_src: str, cand_src: str, device, precision) -> dict:
    """KernelBench's correctness check (run_and_check_correctness, its trials and seeds) with
    TF32 off for cuDNN and cuBLAS, Model and ModelNew built as eval builds them."""
    try:
        with _strict_models(kb, ref_src, cand_src, device, precision) as (ref, new, get_inputs):
            meta: dict = {}
            res = kb.run_and_check_correctness(ref, new, get_inputs, metadata=meta,
                                               num_correct_trials=CORRECT_TRIALS, seed=SEED, device=device,
                                               backend=BACKEND, precision=precision)
        return {"correctness": bool(res.correctness), "trials": meta.get("correctness_trials"),
                "max_difference": [float(x) for x in meta.get("max_difference", [])], "error": _error(meta)["error"]}
    except Exception as e:   # evidence only: its failure is reported, the verdict stands
        return {"correctness": None, "error": _trim(f"{type(e).__name__}: {e}")}


def float64_check(kb, ref_src: str, cand_src: str, device, precision) -> dict:
    """KernelBench's correctness trials (its seeds, so its inputs) with TF32 off, each output
    beside a float64 forward of a copy of the reference (the same weights, float inputs in
    float64): per trial, `ref_err` = max |reference - float64|, `kernel_err` = max |kernel -
    float64|, and `ref_passes`: whether the reference itself passes KernelBench's fp32
    tolerance (allclose, its atol = rtol) against the float64 forward; `ref_as_run_err`: the
    reference as KernelBench's eval runs it (the TF32 flags in force when called, torch's default
    cuDNN TF32) against the same float64 forward, the error krefine's as-run rule allows a margin of."""
    import copy
    import torch
    flags = torch.backends.cudnn, torch.backends.cuda.matmul
    as_run = [f.allow_tf32 for f in flags]
    try:
        with _strict_models(kb, ref_src, cand_src, device, precision) as (ref, new, get_inputs):
            ref, new = ref.to(device=device, dtype=precision), new.to(device=device, dtype=precision)
            ref64, ref_tf32 = copy.deepcopy(ref).to(dtype=torch.float64), copy.deepcopy(ref)   # one call a trial each
            tol = kb.get_tolerance_for_precision(precision)
            torch.manual_seed(SEED)   # run_and_check_correctness's trial seeds
            seeds = [torch.randint(0, 2**32 - 1, (1,)).item() for _ in range(CORRECT_TRIALS)]
            ref_err, kernel_err, ref_passes, ref_as_run_err = [], [], [], []
            with torch.no_grad():
                for seed in seeds:
                    kb.set_seed(seed)
                    inputs = [kb._process_input_tensor(x, device, BACKEND, precision) for x in get_inputs()]
                    out, out_new = ref(*inputs), new(*inputs)
                    strict = [f.allow_tf32 for f in flags]
                    for f, v in zip(flags, as_run):
                        f.allow_tf32 = v
                    try:
                        out_as_run = ref_tf32(*inputs)
                    finally:
                        for f, v in zip(flags, strict):
                            f.allow_tf32 = v
                    out64 = ref64(*[x.double() if torch.is_tensor(x) and x.is_floating_point() else x
                                    for x in inputs])
                    if not all(torch.is_tensor(t) for t in (out, out_new, out64, out_as_run)) \
                            or not out.shape == out_new.shape == out_as_run.shape == out64.shape:
                        return {"error": "an output is not one tensor of the reference's shape"}
                    ref_err.append(float((out.double() - out64).abs().max()))
                    kernel_err.append(float((out_new.double() - out64).abs().max()))
                    ref_passes.append(bool(torch.allclose(out.double(), out64, atol=tol, rtol=tol)))
                    ref_as_run_err.append(float((out_as_run.double() - out64).abs().max()))
        return {"ref_err": ref_err, "kernel_err": kernel_err, "ref_passes": ref_passes,
                "ref_as_run_err": ref_as_run_err, "error": None}
    except Exception as e:   # evidence only: its failure is reported, the verdict stands
        return {"error": _trim(f"{type(e).__name__}: {e}")}


def check(kb_src: Path) -> str | None:
    """Why KernelBench cannot evaluate here (None: it can)."""
    if not (kb_src / "kernelbench" / "eval.py").is_file():
        return f"{kb_src}: no kernelbench/eval.py (pass a KernelBench checkout, the folder holding src/)"
    try:
        import_kernelbench(kb_src)
    except Exception as e:
        return f"KernelBench's eval does not import: {type(e).__name__}: {e}"
    import torch
    if not torch.cuda.is_available():
        return "KernelBench's eval needs a CUDA GPU (torch.cuda.is_available() is False)"
    return None


def _ms(x: float) -> float | None:
    """KernelBench's -1.0 sentinel as None (its times are in ms, whatever its comment says)."""
    return float(x) if x is not None and x > 0 else None


def _error(meta: dict) -> dict:
    """error_name and error: the first of KernelBench's error entries, on one trimmed line."""
    for name_key, key in _ERROR_KEYS:
        if meta.get(key):
            text = str(meta[key])
            if key == "correctness_issue" and meta.get("max_difference"):
                text += f" (max difference {', '.join(map(str, meta['max_difference']))})"
            return {"error_name": str(meta.get(name_key) or key), "error": _trim(text)}
    return {"error_name": None, "error": None}


def _trim(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= ERROR_CHARS else text[:ERROR_CHARS - 1] + "…"


def main(argv: list[str]) -> int:
    if argv[:1] == ["--check"] and len(argv) == 2:
        problem = check(Path(argv[1]))
        print(problem or "ok")
        return 1 if problem else 0
    if len(argv) != 4:
        print("usage: kb_eval.py KB_SRC PROBLEM CANDIDATE RESULT_JSON | --check KB_SRC", file=sys.stderr)
        return 2
    kb_src, problem, candidate, result = map(Path, argv)
    hide_krefine()
    out = eval_against_ref(kb_src, problem.read_text(), candidate.read_text())
    # the harness reads this file once the process is gone: a torn one (a kill) reads as no result
    result.write_text(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
