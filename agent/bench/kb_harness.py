"""KernelBench's own harness over a `krefine bench` directory, beside krefine's verdicts.

For each problem of the bench (one setting of it), its seed (round 0, candidates/r00-c00.py),
the seed portfolio's fastest correct entry ("portfolio", when its text is neither the seed's
nor best.py's: round 0 is never a run's best, so a `--model none` bench has no best.py) and
its best.py (when that text differs from the seed's) go through KernelBench's
eval_kernel_against_ref with KernelBench's defaults (agent/bench/kb_eval.py), each in a fresh
process with a timeout, one process per GPU at a time, N GPUs at once. Each evaluation
becomes one JSON line beside krefine's verdict of the same text (evals/<id>.json): its
verdict, reason and speedup over eager; KernelBench's compiled, correctness, runtime, the
reference's runtime, speedup and error. After each line the Markdown table is rewritten
(agent/bench/kb_compare.py: agreement, the speedup ratio, every disagreement explained or
"unexplained"), so a run cut off still leaves both. Evaluations already in the JSONL (same
problem, kind and text) are skipped: the same command resumes; one whose record predates
evidence kb_eval gathers now (the float64 forward, its as-run reference) runs again, and its new
record is the one read. A progress line's "unexplained so far" waits on the problem's other entries.

  python3 -m agent.bench.kb_harness BENCH --kb .kb --levels .kb/level1 .kb/level2 \\
      [--setting LABEL] [--gpus N] [--timeout-s 300] [--filter REGEX] \\
      [--out kb_harness.jsonl] [--table kb_harness.md]
  python3 -m agent.bench.kb_harness --report-only --out kb_harness.jsonl --table kb_harness.md

BENCH is `krefine bench`'s --out; a problem is matched to its file in the level dirs by
name ("19_ReLU", or "level1__19_ReLU" for a bench over a folder holding the levels). The
reference KernelBench gets is that file. Bad input (a missing folder, no bench, no
KernelBench src, no GPU) is one line and exit 2; an interrupt exits 130. Does not run the
bench (`benchmarks/kernelbench.sh harness` does, before this) and judges nothing itself.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from agent.bench import kb_compare, kb_features
from tools.errors import EXIT_BAD_INPUT, BadInput
from tools.jsonio import append_jsonl, read_jsonl, write_text_atomic

ROOT = Path(__file__).resolve().parents[2]
KB_EVAL = Path(__file__).with_name("kb_eval.py")   # run by path, -P: a fresh process without krefine
SCHEMA = 1
LOG_TAIL_LINES, LOG_TAIL_CHARS = 2, 300   # a dead evaluation's error: its output's last lines


@dataclass(frozen=True)
class Job:
    """One evaluation: a candidate text of one problem, and what krefine said of it."""
    problem: str
    setting: str
    kind: str               # "seed" | "portfolio" | "best"
    candidate: str          # its id in the run, e.g. r00-c00
    text: str
    reference: Path         # the KernelBench problem file
    level: str
    same_reference: bool    # the bench judged this very file's text
    krefine: dict

    @property
    def sha(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()[:16]

    @property
    def key(self) -> tuple:
        return (self.setting, self.problem, self.kind, self.sha)


# ---------------------------------------------------------------- the bench

def level_index(levels: list[Path]) -> dict[str, tuple[str, Path]]:
    """bench problem name -> (level, file): each file under its own name and under
    "<level>__<name>" (a bench over a folder holding the levels names them so)."""
    from agent.bench.suite import find_problems
    index: dict[str, tuple[str, Path]] = {}
    for level in levels:
        for name, path in find_problems(level, []):
            index.setdefault(name, (level.name, path))   # KernelBench's names differ across levels
            index[f"{level.name}__{name}"] = (level.name, path)
    return index


def settings(bench: Path) -> list[str]:
    return sorted({p.parent.parent.name for p in bench.glob("*/*/run.json")})


def collect_jobs(bench: Path, setting: str, index: dict, name_filter: str = "") -> tuple[list[Job], list[str]]:
    """The evaluations the bench offers, in the level dirs' order, and its problems not found
    in the level dirs. A candidate krefine has no verdict for yet (a cut-off bench) is left out."""
    from agent.bench.stats import seed_candidate
    from agent.loop.runstats import load_run
    runs = {p.parent.name: p.parent for p in (bench / setting).glob("*/run.json")}
    unknown = sorted(n for n in runs if n not in index)
    order = {name: i for i, name in enumerate(index)}
    jobs = []
    for name in sorted((n for n in runs if n in index), key=order.get):
        if name_filter and not re.search(name_filter, name):
            continue
        run = load_run(runs[name])
        level, ref = index[name]
        same = run.problem_source == ref.read_text(encoding="utf-8")
        seed = seed_candidate(run)
        seed_text = run.text(run.dir.candidate_src(seed.id)) if seed else None
        if seed and seed.verdict is not None and seed_text is not None:
            jobs.append(Job(name, setting, "seed", seed.id, seed_text, ref, level, same, krefine_side(seed)))
        best_text = run.text(run.dir.best)
        # the seed portfolio's fastest correct entry (round 0 is never the run's best: with
        # --model none there is no best.py, and this is the figure the tables report)
        fastest = max((c for c in run.candidates.values() if c.is_seed and c.correct and c.speedup.get("eager")),
                      key=lambda c: c.speedup["eager"], default=None)
        fastest_text = run.text(run.dir.candidate_src(fastest.id)) if fastest is not None else None
        if fastest_text is not None and fastest_text not in (seed_text, best_text):
            jobs.append(Job(name, setting, "portfolio", fastest.id, fastest_text, ref, level, same,
                            krefine_side(fastest)))
        if best_text is None or best_text == seed_text:
            continue
        # best.py is the text of a correct candidate: the summary's best (a cut-off run has none yet)
        same_text = [c for c in run.candidates.values()
                     if c.correct and run.text(run.dir.candidate_src(c.id)) == best_text]
        best = next((c for c in same_text if c.id == run.best_id), same_text[0] if same_text else None)
        if best is not None:
            jobs.append(Job(name, setting, "best", best.id, best_text, ref, level, same, krefine_side(best)))
    return jobs, unknown


def krefine_side(c) -> dict:
    """What the bench's verdict says of a candidate (agent.loop.runstats.Candidate)."""
    v = c.verdict or {}
    failed = [x for x in (v.get("checks") or {}).get("comparisons", []) if not x.get("ok")]
    return {"verdict": c.status, "correct": c.correct, "speedup_eager": c.speedup.get("eager"),
            "reason": "" if c.correct else c.reason, "diagnostics": [d.get("kind") for d in v.get("diagnostics", [])],
            "flags": list(v.get("flags", [])), "max_abs_err": failed[-1].get("max_abs_err") if failed else None,
            "patterns": [p.split(":")[0] for p in failed[-1].get("patterns", [])] if failed else []}


# ---------------------------------------------------------------- one evaluation, in a fresh process

_live: dict[int, subprocess.Popen] = {}     # pid -> process, while it runs
_live_lock = threading.Lock()
_stopping = threading.Event()               # set by kill_all: no process starts after it


def run_kernelbench(job: Job, kb_src: Path, gpu: str | None, timeout_s: float) -> dict:
    """KernelBench's result for the job (kb_eval.eval_against_ref's dict), or a status saying why
    there is none: "timeout", "crashed" (the process died, its output's tail as error)."""
    work = Path(tempfile.mkdtemp(prefix="kbh-"))   # the child's cwd: every path it gets is absolute
    try:
        cand, result, log_path = work / "candidate.py", work / "result.json", work / "log.txt"
        cand.write_text(job.text, encoding="utf-8")
        env = child_env(work, gpu)
        t0 = time.perf_counter()
        with open(log_path, "wb") as log, _live_lock:
            if _stopping.is_set():
                return {"status": "interrupted", "error": "the harness was interrupted first"}
            proc = subprocess.Popen(
                [sys.executable, "-P", str(KB_EVAL), str(kb_src.resolve()), str(job.reference.resolve()), str(cand),
                 str(result)],
                cwd=work,                   # a fresh folder; -P: neither it nor agent/bench/ on sys.path
                env=env,                    # the caller's, krefine off PYTHONPATH, its GPU alone
                stdin=subprocess.DEVNULL,   # KernelBench asks nothing
                stdout=log, stderr=subprocess.STDOUT,   # its chatter: the tail is the error if it dies
                start_new_session=True)     # its own process group, killed whole on timeout
            _live[proc.pid] = proc
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill(proc)
            rc = None
        finally:
            with _live_lock:
                _live.pop(proc.pid, None)
        wall = round(time.perf_counter() - t0, 1)
        if rc is None:
            return {"status": "timeout", "error": f"no result within {timeout_s:g} s", "wall_s": wall}
        try:
            return {**json.loads(result.read_text()), "process_s": wall}
        except (OSError, ValueError):
            lines = [ln.strip() for ln in log_path.read_text(errors="replace").splitlines() if ln.strip()]
            tail = " ".join(lines[-LOG_TAIL_LINES:])[-LOG_TAIL_CHARS:]
            return {"status": "crashed", "error": f"exit {rc}: {tail}", "wall_s": wall}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def child_env(work: Path, gpu: str | None) -> dict[str, str]:
    """The caller's environment, as a KernelBench user's shell has it, less krefine on
    PYTHONPATH; temp files in `work`; GPU `gpu` alone (None: what the caller sees)."""
    env = dict(os.environ, TMPDIR=str(work), PYTHONUNBUFFERED="1",
               PYTHONPATH=os.pathsep.join(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                                          if p and Path(p).resolve() != ROOT))
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpu
    return env


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def kill_all() -> None:
    with _live_lock:
        _stopping.set()
        procs = list(_live.values())
    for p in procs:
        _kill(p)


def preflight(kb_src: Path) -> None:
    """KernelBench imports in a process like the evaluations' and a GPU is there, or BadInput."""
    p = subprocess.run([sys.executable, "-P", str(KB_EVAL), "--check", str(kb_src.resolve())], capture_output=True,
                       text=True, timeout=300, stdin=subprocess.DEVNULL, env=child_env(Path(tempfile.gettempdir()), None))
    if p.returncode != 0:
        lines = (p.stdout + p.stderr).strip().splitlines()
        raise BadInput("", f"kb_harness: {lines[-1] if lines else f'the KernelBench check exited {p.returncode}'}")


# ---------------------------------------------------------------- records

def record(job: Job, kb: dict) -> dict:
    return {"schema": SCHEMA, "problem": job.problem, "setting": job.setting, "level": job.level, "kind": job.kind,
            "candidate": job.candidate, "sha": job.sha, "reference": str(job.reference),
            "same_reference": job.same_reference, "features": kb_features.features(job.reference.read_text()),
            "krefine": job.krefine, "kb": kb}


def load_records(path: Path) -> list[dict]:
    """The JSONL's records; a line torn by a kill is cut off the file first, so appends go on whole."""
    records = list(read_jsonl(path))
    if path.exists() and not path.read_text(encoding="utf-8").endswith("\n") and path.stat().st_size:
        write_text_atomic(path, "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records))
    return records


def pending(jobs: list[Job], records: list[dict]) -> list[Job]:
    """Jobs with no record, or whose record lacks evidence kb_eval gathers now: an output
    mismatch that failed with TF32 off too, written before the float64 forward was run, or
    one still unexplained, written before that forward measured the as-run reference."""
    peers = latest(records)
    done = {(r["setting"], r["problem"], r["kind"], r["sha"]) for r in records if not _lacks_evidence(r, peers)}
    return [j for j in jobs if j.key not in done]


def _lacks_evidence(rec: dict, peers: list[dict]) -> bool:
    kb = rec.get("kb") or {}
    f64 = kb.get("float64") or {}
    if "float64" not in kb:
        return str(kb.get("error") or "").startswith("Output mismatch") \
            and (kb.get("strict_fp32") or {}).get("correctness") is False
    return bool(f64) and not f64.get("error") and "ref_as_run_err" not in f64 \
        and kb_compare.explain(rec, peers) == kb_compare.UNEXPLAINED


def latest(records: list[dict]) -> list[dict]:
    """The last record of each (setting, problem, kind), in natural problem order, seed first."""
    from agent.bench.suite import _natural
    last = {(r["setting"], r["problem"], r["kind"]): r for r in records}
    return sorted(last.values(), key=lambda r: (r["setting"], _natural(r["problem"]), kb_compare.KINDS.index(r["kind"])))


def progress_line(i: int, n: int, rec: dict, peers: list[dict] = (), waiting: bool = False) -> str:
    kr, kb = rec["krefine"], rec["kb"]
    kb_says = (("correct" if kb["correctness"] else "incorrect" if kb["compiled"] else "not compiled")
               if kb.get("status") == "ok" else kb.get("status"))
    kr_x = f" {kr['speedup_eager']:.2f}x" if kr.get("speedup_eager") else ""
    kb_x = f" {kb['speedup']:.2f}x" if kb.get("speedup") else ""
    why = kb_compare.explain(rec, latest(list(peers)))
    why += " so far (the problem's other entries are still running)" if waiting and why == kb_compare.UNEXPLAINED else ""
    return (f"[{i}/{n}] {rec['problem']} {rec['kind']}: krefine {kr['verdict']}{kr_x} | KernelBench {kb_says}{kb_x}"
            + f" ({kb.get('process_s') or kb.get('wall_s')} s)" + (f" DIFFER: {why}" if why else ""))


# ---------------------------------------------------------------- main

def parse_args(argv):
    ap = argparse.ArgumentParser(description="KernelBench's eval_kernel_against_ref on a krefine bench's "
                                             "seeds and bests, beside krefine's verdicts")
    ap.add_argument("bench", type=Path, nargs="?", help="`krefine bench --out` directory")
    ap.add_argument("--kb", type=Path, help="KernelBench checkout (the folder holding src/kernelbench)")
    ap.add_argument("--levels", type=Path, nargs="+", default=[], help="KernelBench level dirs")
    ap.add_argument("--setting", default=None, help="the bench's setting (its subfolder); default: the only one")
    ap.add_argument("--gpus", type=int, default=1, help="evaluations at once, one GPU each")
    ap.add_argument("--timeout-s", type=float, default=300.0, help="per evaluation (run_and_check.py's)")
    ap.add_argument("--filter", default="", help="only problems whose name matches this regex")
    ap.add_argument("--out", type=Path, default=Path("kb_harness.jsonl"))
    ap.add_argument("--table", type=Path, default=None, help="Markdown table (default: --out with .md)")
    ap.add_argument("--report-only", action="store_true", help="evaluate nothing: the table from --out")
    return ap.parse_args(argv)


def check_inputs(args) -> tuple[str, dict]:
    """The setting and the level index, or BadInput naming what is wrong."""
    if args.bench is None:
        raise BadInput("", "kb_harness: BENCH (a `krefine bench --out` directory) is required")
    if not args.bench.is_dir():
        raise BadInput(args.bench, "no such directory")
    found = settings(args.bench)
    if not found:
        raise BadInput(args.bench, "not a krefine bench directory (no SETTING/PROBLEM/run.json)")
    if args.kb is None or not (args.kb / "src" / "kernelbench" / "eval.py").is_file():
        raise BadInput(args.kb or "", "no KernelBench src (--kb names the checkout holding src/kernelbench/eval.py)")
    if not args.levels:
        raise BadInput("", "kb_harness: --levels names the KernelBench level dirs the bench ran")
    for level in args.levels:
        if not level.is_dir():
            raise BadInput(level, "no such level directory")
    setting = args.setting or (found[0] if len(found) == 1 else None)
    if setting not in found:
        raise BadInput(args.bench, f"settings here: {', '.join(found)}; name one with --setting"
                       if args.setting is None else f"no setting {args.setting!r} (settings here: {', '.join(found)})")
    if args.gpus < 1:
        raise BadInput("", f"kb_harness: --gpus must be at least 1, got {args.gpus}")
    try:
        re.compile(args.filter)
    except re.error as e:
        raise BadInput("", f"kb_harness: --filter: {e}") from None
    return setting, level_index(args.levels)


def gpu_ids(n: int) -> list[str | None]:
    from agent.bench.workers import visible_gpus
    try:
        ids = visible_gpus("cuda", n)
    except BadInput as e:
        raise BadInput("", f"kb_harness: {e.fault.removeprefix('krefine bench: ')}") from None
    return ids if n > 1 else [None]   # one: the process's own view, as KernelBench's users run it


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def write_table(args, records: list[dict]) -> None:
    write_text_atomic(args.table, kb_compare.markdown(latest(records)))


def main(argv=None) -> int:
    args = parse_args(argv)
    args.table = args.table or args.out.with_suffix(".md")
    try:
        if args.report_only:
            if not args.out.is_file():
                raise BadInput(args.out, "no such results file")
            records = load_records(args.out)
            write_table(args, records)
            print(summary_text(records))
            return 0
        # 1) inputs, the bench's evaluations, what is left of them
        setting, index = check_inputs(args)
        jobs, unknown = collect_jobs(args.bench, setting, index, args.filter)
        if unknown:
            print(f"not in the level dirs (skipped): {', '.join(unknown)}", flush=True)
        if not jobs and unknown:
            raise BadInput(args.bench, "none of its problems is in the level dirs given")
        records = load_records(args.out)
        todo = pending(jobs, records)
        print(f"kb_harness: {len(jobs)} evaluations in {args.bench / setting}; {len(jobs) - len(todo)} done, "
              f"{len(todo)} to run on {args.gpus} GPU(s)", flush=True)
        if not todo:
            write_table(args, records)
            print(summary_text(records))
            return 0
        # 2) KernelBench importable in the evaluations' kind of process, a GPU there
        preflight(args.kb / "src")
        gpus = gpu_ids(args.gpus)
    except BadInput as e:
        print(str(e), file=sys.stderr)
        return EXIT_BAD_INPUT
    # 3) the evaluations, one per GPU at a time; this thread alone writes the records
    free = list(gpus)
    lock = threading.Lock()

    def one(job: Job) -> dict:
        with lock:
            gpu = free.pop()
        try:
            return run_kernelbench(job, args.kb / "src", gpu, args.timeout_s)
        finally:
            with lock:
                free.append(gpu)

    signal.signal(signal.SIGTERM, _interrupt)   # `timeout` ends it as Ctrl-C does: children killed
    args.out.parent.mkdir(parents=True, exist_ok=True)
    pool = ThreadPoolExecutor(max_workers=len(gpus))
    try:
        futures = {pool.submit(one, j): j for j in todo}
        for i, fut in enumerate(as_completed(futures), 1):
            rec = record(futures[fut], fut.result())
            append_jsonl(args.out, rec)
            records.append(rec)
            write_table(args, records)
            waiting = any(not f.done() and futures[f].problem == rec["problem"] for f in futures)
            print(progress_line(i, len(todo), rec, records, waiting), flush=True)
    except KeyboardInterrupt:
        pool.shutdown(wait=False, cancel_futures=True)
        kill_all()
        print(f"kb_harness: interrupted; the same command resumes ({len(records)} evaluations in {args.out})",
              file=sys.stderr)
        return 130
    pool.shutdown()
    print(summary_text(records))
    print(f"wrote {args.out} and {args.table}")
    return 0


def summary_text(records: list[dict]) -> str:
    s = kb_compare.summary(latest(records))
    r = s["ratio"]
    share = "—" if s["agree_share"] is None else f"{s['agree_share']:.0%}"
    ratio = "—" if r is None else (f"median {r['median']:.2f}, p10 {r['p10']:.2f}, p90 {r['p90']:.2f}, "
                                  f"min {r['min']:.2f}, max {r['max']:.2f} (n={r['n']})")
    return (f"agree: {s['agree']}/{s['kb_verdicts']} ({share}) of {s['evaluations']} evaluations; "
            f"disagree {s['disagree']} ({s['unexplained']} unexplained); KB speedup / krefine speedup: {ratio}")


if __name__ == "__main__":
    sys.exit(main())
