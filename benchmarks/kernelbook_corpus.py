"""The KernelBook corpus (issue 10): torch.compile's kernels for each problem, in KernelBook format.

GPU step, one bundle file:

  python3 benchmarks/kernelbook_corpus.py --problems tests/dialect/problems --out DIR [--only a,b]
  (--device cpu: the same path as a dry run in Triton's interpreter, configs from the heuristics)

For every problem: torch.compile its Model on cuda (tools.dialect.capture: the Inductor
code, which module tensor each call() argument is, the configs the autotuner chose),
convert it (tools.dialect.convert), then a quick in-process sanity check: the
candidate imports (KernelBook's torch-2.5 names provided by tools.dialect.install) and
its ModelNew, built like the judge builds it, matches Model on one input (fp32 1e-4).
Writes DIR/kernelbook_corpus.json: {problem: {"candidate", "inductor", "capture", "torch",
"triton", "gpu", "ok", "error"}}, rewritten after each problem so a cut-off run keeps
what it finished.

Unpack anywhere (the corpus candidates are then judged on cpu by tests/test_kernelbook.py):

  python3 benchmarks/kernelbook_corpus.py --unpack DIR/kernelbook_corpus.json --dest tests/dialect/candidates_gpu/

writes one <problem>.py per ok entry, its docstring saying how it was produced and the
verdict the cpu judge must give ("expect: correct", or "expect: rejected extern_kernels.mm"
when a library matmul remains). Not a timing benchmark: nothing is timed.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
BUNDLE = "kernelbook_corpus.json"
SANITY_SEED, SANITY_TOL = 7, 1e-4


def build(problems_dir: Path, out_dir: Path, only: set[str], device: str) -> int:
    import torch
    import triton

    from tools import dialect
    from tools.dialect import capture, capture_text, convert
    from tools.problem import load_problem
    dialect.install(device)
    out_dir.mkdir(parents=True, exist_ok=True)
    bundle: dict[str, dict] = {}
    paths = [p for p in sorted(problems_dir.glob("*.py")) if not only or p.stem in only]
    for path in paths:
        entry = {"candidate": None, "inductor": None, "capture": None, "torch": torch.__version__,
                 "triton": triton.__version__, "ok": False, "error": None,
                 "gpu": torch.cuda.get_device_name() if device == "cuda" else "cpu (Triton interpreter)"}
        try:
            # 1) compile, 2) convert, 3) sanity
            problem = load_problem(path)
            cap = capture(problem, device)
            entry["inductor"] = cap.code
            entry["capture"] = capture_text(cap).partition("\n")[0]
            entry["candidate"] = convert(problem, cap)
            entry["error"] = sanity(problem, entry["candidate"], device)
            entry["ok"] = entry["error"] is None
        except Exception as e:   # one problem's failure is its entry's error, the others go on
            entry["error"] = f"{type(e).__name__}: {' '.join(str(e).split())[:400]}"
            traceback.print_exc()
        bundle[path.stem] = entry
        print(f"{path.stem}: {'ok' if entry['ok'] else 'FAILED ' + str(entry['error'])}", flush=True)
        (out_dir / BUNDLE).write_text(json.dumps(bundle, indent=1, sort_keys=True))
    ok = sum(e["ok"] for e in bundle.values())
    print(f"{ok}/{len(bundle)} ok -> {out_dir / BUNDLE}")
    return 0 if ok == len(bundle) else 1


def sanity(problem, src: str, device: str) -> str | None:
    """None when the candidate's ModelNew matches Model on one input, else why not."""
    import importlib.util
    import tempfile

    import torch

    from tools.problem import build_model, make_inputs
    from tools.settings import EvalSettings
    seed = EvalSettings().test.init_seed
    with tempfile.TemporaryDirectory() as tmp:   # @triton.jit reads its source from a file
        path = Path(tmp) / f"{problem.name}_candidate.py"
        path.write_text(src)
        spec = importlib.util.spec_from_file_location(f"kernelbook_{problem.name}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    ref = build_model(problem.module.Model, problem.module, seed, device)
    new = build_model(module.ModelNew, problem.module, seed, device)
    inputs = make_inputs(problem.module, SANITY_SEED, device)
    with torch.no_grad():
        want, got = ref(*inputs), new(*inputs)
    if not isinstance(got, torch.Tensor) or got.shape != want.shape or got.dtype != want.dtype:
        return f"output {type(got).__name__} {getattr(got, 'shape', '')} != reference {tuple(want.shape)}"
    if not torch.allclose(got, want, atol=SANITY_TOL, rtol=SANITY_TOL):
        return f"max abs diff {(got - want).abs().max().item():.3g} above {SANITY_TOL}"
    return None


def unpack(bundle_path: Path, dest: Path) -> int:
    bundle = json.loads(bundle_path.read_text())
    dest.mkdir(parents=True, exist_ok=True)
    for name, e in sorted(bundle.items()):
        if not e.get("ok"):
            print(f"{name}: skipped ({e.get('error')})")
            continue
        (dest / f"{name}.py").write_text(docstring(name, e) + e["candidate"])
        print(f"{name}: {dest / (name + '.py')}")
    return 0


def docstring(name: str, e: dict) -> str:
    import textwrap
    externs = sorted(set(re.findall(r"extern_kernels\.(\w+)\(", e["candidate"])))
    expect = f"rejected extern_kernels.{externs[0]}" if externs else "correct"
    meta = json.loads((e.get("capture") or "{}").partition(": ")[2] or "{}")
    configs = "the launch configs the autotuner chose" if meta.get("launch_configs") else \
        "launch configs from Inductor's heuristics"
    text = (f"Produced by benchmarks/kernelbook_corpus.py: torch.compile of the problem's Model on "
            f"{e.get('gpu')} (torch {e.get('torch')}, triton {e.get('triton')}), converted by "
            f"tools/dialect/kernelbook.py with {configs}; its ModelNew matched Model there, in-process.")
    return (f'"""KernelBook-format candidate for tests/dialect/problems/{name}.py (not model-written).\n\n'
            + textwrap.fill(text, 88) + f'\n\nexpect: {expect}\n"""\n')


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--problems", type=Path, default=ROOT / "tests" / "dialect" / "problems")
    ap.add_argument("--out", type=Path, help="GPU step: directory for the bundle")
    ap.add_argument("--only", default="", help="comma-separated problem names")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                    help="cpu: a dry run of the whole path in Triton's interpreter (static configs)")
    ap.add_argument("--unpack", type=Path, help="a bundle to write out as candidate files")
    ap.add_argument("--dest", type=Path, default=ROOT / "tests" / "dialect" / "candidates_gpu")
    args = ap.parse_args()
    if args.unpack:
        return unpack(args.unpack, args.dest)
    if not args.out:
        ap.error("--out DIR (GPU step) or --unpack BUNDLE")
    if args.device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"   # before any candidate's @triton.jit
    return build(args.problems, args.out, {s for s in args.only.split(",") if s}, args.device)


if __name__ == "__main__":
    sys.exit(main())
