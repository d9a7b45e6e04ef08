"""The judge's GPU memory on KernelBench level 1 against a plain harness's floor (issue 17).

  seed   python3 benchmarks/kb_memory.py seed LEVEL_DIR SEED_DIR [--jobs 4]
         the Inductor seed of every problem (`python -m tools.dialect seed`), as
         candidates that a judge may call correct; a log line per problem
  floor  python3 benchmarks/kb_memory.py floor LEVEL_DIR --out floors.jsonl
         what a plain in-process harness needs at least, per problem (one process for all):
         inputs, the reference output, a second output, one torch.allclose (the harness
         of the issue's `kb_mem_floor.py`), peak torch.cuda.max_memory_allocated
  judge  python3 benchmarks/kb_memory.py judge LEVEL_DIR SEED_DIR --out judge.jsonl
         every seed in order, `krefine eval P SEED --json --no-profile` through ONE judge
         service (started by the first eval); a sampler reads the GPU's used memory from
         NVML every 2 ms: the judge's peak during an eval is the most used then minus what
         was used before the service started; `--alone` gives each eval a fresh service
  table  python3 benchmarks/kb_memory.py table floors.jsonl judge.jsonl [alone.jsonl]
         the markdown table of BENCHMARKS.md: peak / floor per problem, verdicts

Every mode appends one JSON line per problem as it finishes and skips problems already
in --out, so a run cut off (by `timeout`, SIGTERM) goes on where it stopped. Peaks
include the CUDA contexts of the judge's processes (the service and the worker, about
0.5 GiB each on an H100); the table gives the ratio with and without them.
KernelBench is not part of krefine: pass its level directory (uncommitted).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GIB = float(1 << 30)

FLOOR = r"""
import importlib.util, json, sys, torch
for path in sys.argv[1:]:
    spec = importlib.util.spec_from_file_location("p", path); m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    torch.cuda.empty_cache(); torch.cuda.reset_peak_memory_stats()
    torch.manual_seed(42)
    model = m.Model(*m.get_init_inputs()).cuda()
    with torch.device("cuda"):   # made where they are used: the same bytes, minutes less than on the CPU
        inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in m.get_inputs()]
    with torch.no_grad():
        ref = model(*inputs); out = model(*inputs)
        same = bool(torch.allclose(ref, out, atol=1e-2, rtol=1e-2))
    print(json.dumps({"path": path, "floor_gib": torch.cuda.max_memory_allocated() / 2**30, "same": same,
                      "inputs_gib": sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor)) / 2**30,
                      "output_gib": ref.numel() * ref.element_size() / 2**30}), flush=True)
    del model, inputs, ref, out
"""
CONTEXT = r"""
import os, torch, pynvml as nv
torch.zeros(1, device="cuda"); torch.cuda.synchronize(); nv.nvmlInit(); h = nv.nvmlDeviceGetHandleByIndex(0)
print(next(p.usedGpuMemory for p in nv.nvmlDeviceGetComputeRunningProcesses(h) if p.pid == os.getpid()) / 2**30)
"""


ONLY: set[str] = set()   # --only: problem names (stems) or their numbers


def problems(level: Path) -> list[Path]:
    ps = sorted(level.glob("*.py"), key=lambda p: (int(p.name.split("_")[0]), p.name))
    return [p for p in ps if not ONLY or p.stem in ONLY or p.name.split("_")[0] in ONLY]


def done(out: Path) -> set[str]:
    if not out.exists():
        return set()
    return {json.loads(ln)["problem"] for ln in out.read_text().splitlines() if ln.strip()}


def append(out: Path, row: dict) -> None:
    with out.open("a") as f:
        f.write(json.dumps(row, default=str) + "\n")
    print(json.dumps(row, default=str)[:220], flush=True)


class Sampler:
    """The GPU's used memory (NVML), sampled every `period_s` in a thread; `peak()` of a window."""

    def __init__(self, index: int = 0, period_s: float = 0.002):
        import pynvml as nv
        nv.nvmlInit()
        self.nv, self.h, self.period_s = nv, nv.nvmlDeviceGetHandleByIndex(index), period_s
        self.max_bytes, self.at_max, self.lock, self.stop = 0, {}, threading.Lock(), False
        threading.Thread(target=self._run, daemon=True).start()

    def used(self) -> int:
        return int(self.nv.nvmlDeviceGetMemoryInfo(self.h).used)

    def _run(self) -> None:
        while not self.stop:
            u = self.used()
            if u > self.max_bytes:   # who holds it, at each new high (a slower NVML call)
                try:
                    procs = {p.pid: round((p.usedGpuMemory or 0) / GIB, 2)
                             for p in self.nv.nvmlDeviceGetComputeRunningProcesses(self.h)}
                except self.nv.NVMLError:
                    procs = {}
                with self.lock:
                    self.max_bytes, self.at_max = max(self.max_bytes, u), procs
            time.sleep(self.period_s)

    def window(self) -> tuple[int, dict]:
        """The most used since the last call, and by which processes (pid: GiB) at that
        moment (and starts a new window)."""
        with self.lock:
            m, who, self.max_bytes, self.at_max = self.max_bytes, self.at_max, 0, {}
        return m, who


def seed(args) -> None:
    args.seed_dir.mkdir(parents=True, exist_ok=True)
    log = args.seed_dir / "seed_log.jsonl"
    todo = [p for p in problems(args.level) if p.stem not in done(log)]
    t_end = time.monotonic() + args.budget_s

    def one(p: Path) -> None:
        if time.monotonic() > t_end:
            return
        t = time.monotonic()
        try:
            r = subprocess.run([sys.executable, "-m", "tools.dialect", "seed", str(p), "--device", "cuda",
                                "--out", str(args.seed_dir / p.name)], cwd=ROOT, capture_output=True, text=True,
                               timeout=args.timeout_s)
            rc, err = r.returncode, (r.stderr.strip().splitlines() or [""])[-1][:300]
        except subprocess.TimeoutExpired:
            rc, err = "timeout", f"over {args.timeout_s} s"
        append(log, {"problem": p.stem, "rc": rc, "s": round(time.monotonic() - t, 1), "error": err})
    with ThreadPoolExecutor(args.jobs) as pool:
        list(pool.map(one, todo))


def floor(args) -> None:
    if not any(json.loads(ln).get("problem") == "_context" for ln in
               (args.out.read_text().splitlines() if args.out.exists() else [])):
        r = subprocess.run([sys.executable, "-c", CONTEXT], capture_output=True, text=True, timeout=120)
        append(args.out, {"problem": "_context", "context_gib": float(r.stdout.strip() or "nan")})
    todo = [p for p in problems(args.level) if p.stem not in done(args.out)]
    # one process for all (each problem's peak counted from its own reset); one that
    # fails or runs out of time leaves the rest to the next call
    proc = subprocess.Popen([sys.executable, "-c", FLOOR, *map(str, todo)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    timer = threading.Timer(args.budget_s, proc.kill)
    timer.start()
    for line in proc.stdout:
        row = json.loads(line)
        append(args.out, {"problem": Path(row.pop("path")).stem, **row})
    proc.wait()
    timer.cancel()
    if proc.returncode not in (0, -9):
        print("floor:", (proc.stderr.read().strip().splitlines() or ["?"])[-1][:300], flush=True)


def judge(args) -> None:
    env = dict(os.environ)
    env.setdefault("KREFINE_JUDGE_DIR", tempfile.mkdtemp(prefix="krefine-kbmem-"))
    krefine = [sys.executable, "-m", "agent.cli"]
    sampler = Sampler()
    base = sampler.used()
    t_end = time.monotonic() + args.budget_s
    for p in problems(args.level):
        cand = args.seed_dir / p.name
        if p.stem in done(args.out) or time.monotonic() > t_end:
            continue
        if not cand.is_file():
            append(args.out, {"problem": p.stem, "verdict": "no_seed"})
            continue
        if args.alone:
            subprocess.run(krefine + ["judge", "stop"], cwd=ROOT, env=env, capture_output=True, timeout=120)
            time.sleep(1.0)
            base = sampler.used()
        sampler.window()   # a new window for this eval
        t = time.monotonic()
        try:
            extra = ["--config", str(args.config)] if args.config else []
            r = subprocess.run(krefine + ["eval", str(p), str(cand), "--json", "--no-profile", "--keep-judge", "900",
                                          *extra],
                               cwd=ROOT, env=env, capture_output=True, text=True, timeout=args.timeout_s)
            rc, stdout, stderr = r.returncode, r.stdout, r.stderr
        except subprocess.TimeoutExpired:
            rc, stdout, stderr = "timeout", "", ""
        wall = time.monotonic() - t
        peak, who = sampler.window()
        time.sleep(0.5)
        row = {"problem": p.stem, "rc": rc, "wall_s": round(wall, 1), "peak_gib": round((peak - base) / GIB, 3),
               "held_after_gib": round((sampler.used() - base) / GIB, 3), "at_peak_gib_by_pid": who}
        try:
            v = json.loads(stdout.strip().splitlines()[-1])
            row.update(verdict=v["verdict"], speedup=v.get("speedup"), flags=v.get("flags"),
                       memory=v["checks"].get("memory"), diagnostics=[d["message"][:200] for d in v["diagnostics"]][:3],
                       judged_again=v["checks"].get("judged_again_after"), oom=v["checks"].get("oom"),
                       phase_s=v["checks"].get("phase_s"), session_s=v["checks"].get("session_s"))
        except (ValueError, IndexError, KeyError):
            row.update(verdict=f"exit{rc}", stderr=stderr.strip()[-300:])
        append(args.out, row)
    if not args.keep_service:
        subprocess.run(krefine + ["judge", "stop"], cwd=ROOT, env=env, capture_output=True, timeout=120)


def table(args) -> None:
    rows = lambda path: {r["problem"]: r for r in map(json.loads, Path(path).read_text().splitlines()) if r}  # noqa: E731
    floors, judged = rows(args.floors), rows(args.judge)
    alone = rows(args.alone_file) if args.alone_file else {}
    ctx = floors.get("_context", {}).get("context_gib") or 0.0
    print(f"| problem | inputs GiB | floor GiB | judge peak GiB | peak / floor | (peak - 2 contexts) / floor | "
          f"verdict in one service | alone |")
    print("|---|---|---|---|---|---|---|---|")
    ratios = []
    for name, j in judged.items():
        f = floors.get(name, {})
        fl, pk = f.get("floor_gib"), j.get("peak_gib")
        r1 = pk / fl if fl and pk is not None else None
        r2 = (pk - 2 * ctx) / fl if fl and pk is not None else None
        if r2 is not None and j.get("verdict") not in ("no_seed",):
            ratios.append((r2, name))
        a = alone.get(name, {}).get("verdict", "")
        print(f"| {name} | {_f(f.get('inputs_gib'))} | {_f(fl)} | {_f(pk)} | {_f(r1)} | {_f(r2)} | "
              f"{j.get('verdict')} | {a} |")
    if ratios:
        print(f"\nworst (peak - contexts) / floor: {max(ratios)[0]:.2f} ({max(ratios)[1]}); context {ctx:.2f} GiB")


def _f(x) -> str:
    return f"{x:.2f}" if isinstance(x, (int, float)) else "-"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    s = sub.add_parser("seed")
    s.add_argument("level", type=Path)
    s.add_argument("seed_dir", type=Path)
    s.add_argument("--jobs", type=int, default=4)
    s.add_argument("--timeout-s", type=float, default=300)
    s.add_argument("--budget-s", type=float, default=520)
    f = sub.add_parser("floor")
    f.add_argument("level", type=Path)
    f.add_argument("--out", type=Path, required=True)
    f.add_argument("--budget-s", type=float, default=520)
    j = sub.add_parser("judge")
    j.add_argument("level", type=Path)
    j.add_argument("seed_dir", type=Path)
    j.add_argument("--out", type=Path, required=True)
    j.add_argument("--alone", action="store_true")
    j.add_argument("--keep-service", action="store_true")
    j.add_argument("--config", type=Path, default=None, help="an agent.toml for the evals (e.g. fewer timing rounds)")
    j.add_argument("--timeout-s", type=float, default=240)
    j.add_argument("--budget-s", type=float, default=520)
    t = sub.add_parser("table")
    t.add_argument("floors")
    t.add_argument("judge")
    t.add_argument("alone_file", nargs="?")
    for p in (s, f, j):
        p.add_argument("--only", default="", help="comma-separated problem names or numbers")
    args = ap.parse_args()
    ONLY.update(x for x in getattr(args, "only", "").split(",") if x)
    {"seed": seed, "floor": floor, "judge": judge, "table": table}[args.mode](args)


if __name__ == "__main__":
    main()
