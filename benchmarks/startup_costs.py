"""Where a fresh candidate process spends its time on this GPU machine, piece by piece.

Each figure is measured in its own fresh subprocess (the way a worker starts), so the
numbers add up to what one evaluation pays before it does any judging:

  import      python + torch, + triton, + triton.language
  cuda_init   the first CUDA allocation (context creation)
  fork        fork of a process that imported torch+triton; does CUDA work in the child,
              after which parent-side calls (torch.cuda.is_available, NVML check)?
  triton_jit  first launch of a kernel in an empty TRITON_CACHE_DIR, split into
              warmup=True compile and the launch (launcher build), then a second
              kernel of another signature
  profiler    the first torch.profiler session in a process, then a second
  compile     torch.compile of a small model, cold (empty inductor cache) and warm

  python3 benchmarks/startup_costs.py --out $OUT/startup.json

Used to decide what the persistent judge keeps warm (BENCHMARKS.md, "Evaluator throughput beside KernelBench").
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

SNIPPETS = {
    "import_torch": "import torch",
    "import_torch_triton": "import torch, triton, triton.language",
    "cuda_init": "import torch, time\nt=time.perf_counter(); torch.zeros(1, device='cuda'); "
                 "torch.cuda.synchronize(); print('INNER', time.perf_counter()-t)",
    "fork": r'''
import os, time, torch, triton, triton.language as tl
res = {}
for label, prep in (("plain", lambda: None),
                    ("after_nvml_check", lambda: os.environ.__setitem__("PYTORCH_NVML_BASED_CUDA_CHECK", "1") or torch.cuda.is_available()),
                    ("after_is_available", lambda: torch.cuda.is_available())):
    prep()
    t = time.perf_counter()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            t1 = time.perf_counter()
            x = torch.ones(4, device="cuda"); torch.cuda.synchronize()
            msg = f"ok {float((x + 1).sum()):.0f} {time.perf_counter() - t1:.3f}"
        except Exception as e:
            msg = f"fail {type(e).__name__}: {str(e)[:120]}"
        os.write(w, msg.encode()); os._exit(0)
    os.close(w)
    fork_s = time.perf_counter() - t
    msg = os.read(r, 1000).decode(); os.waitpid(pid, 0)
    res[label] = {"fork_s": round(fork_s, 4), "child": msg}
print("INNER", res)
''',
    "triton_jit": r'''
import time, torch, triton, triton.language as tl
@triton.jit
def add(x, y, o, n, B: tl.constexpr):
    i = tl.program_id(0) * B + tl.arange(0, B); m = i < n
    tl.store(o + i, tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)
@triton.jit
def scale(x, o, n, s, B: tl.constexpr):
    i = tl.program_id(0) * B + tl.arange(0, B); m = i < n
    tl.store(o + i, tl.load(x + i, mask=m) * s, mask=m)
x = torch.randn(4096, device="cuda"); y = torch.randn_like(x); o = torch.empty_like(x)
torch.cuda.synchronize()
t = time.perf_counter(); add.run(x, y, o, 4096, B=1024, grid=(4,), warmup=True); c = time.perf_counter() - t
t = time.perf_counter(); add[(4,)](x, y, o, 4096, B=1024); torch.cuda.synchronize(); l = time.perf_counter() - t
t = time.perf_counter(); scale[(4,)](x, o, 4096, 2.0, B=1024); torch.cuda.synchronize(); s = time.perf_counter() - t
t = time.perf_counter(); scale[(4,)](x, o, 4096, 2.0, B=1024); torch.cuda.synchronize(); s2 = time.perf_counter() - t
print("INNER", {"compile_warmup_s": round(c, 3), "first_launch_after_compile_s": round(l, 3),
                "second_kernel_first_call_s": round(s, 3), "second_kernel_second_call_s": round(s2, 4)})
''',
    "profiler": r'''
import time, torch
from torch.profiler import profile, ProfilerActivity
x = torch.randn(1 << 20, device="cuda"); torch.cuda.synchronize()
out = {}
for k in ("first", "second"):
    t = time.perf_counter()
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        (x * 2).sum(); torch.cuda.synchronize()
    p.key_averages()
    out[k] = round(time.perf_counter() - t, 3)
print("INNER", out)
''',
    "compile": r'''
import time, torch
m = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.GELU()).cuda()
x = torch.randn(64, 256, device="cuda")
t = time.perf_counter(); c = torch.compile(m)
with torch.no_grad(): c(x)
torch.cuda.synchronize(); print("INNER", round(time.perf_counter() - t, 3))
''',
}


def run(code: str, env: dict) -> dict:
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    wall = time.perf_counter() - t
    inner = [ln[6:] for ln in p.stdout.splitlines() if ln.startswith("INNER ")]
    return {"wall_s": round(wall, 3), "inner": inner[-1] if inner else None, "rc": p.returncode,
            "stderr": p.stderr[-400:] if p.returncode else ""}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    results = {}
    base = dict(os.environ)
    with tempfile.TemporaryDirectory() as cold:
        for name, code in SNIPPETS.items():
            env = dict(base, TRITON_CACHE_DIR=os.path.join(cold, name, "triton"),
                       TORCHINDUCTOR_CACHE_DIR=os.path.join(cold, "inductor"))
            reps = 2 if name in ("import_torch", "import_torch_triton", "compile") else 1
            results[name] = [run(code, env) for _ in range(reps)]
            print(name, json.dumps(results[name]), flush=True)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
