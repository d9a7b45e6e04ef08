"""The fresh process of tools/blame.py: one of the judge's calls into a problem's
code, replayed as the judge makes it.

  python -m tools.recheck PROBLEM STEP --device cpu|cuda --seed N --init-seed M
                                --module-mode train|eval --out FILE

runs the calls that blame.STEPS lists for STEP (those the judge made before it, then STEP
itself) with tools/problem.py's own functions, stops at the first that raises, and
writes one JSON object to FILE: {"ok": true}, or {"ok": false, "step", "type" (the
exception's qualified type), "fault" (its one-line description)}. blame.py starts it with
a worker's scrubbed environment; on cuda the one GPU it shows is the judge's. The problem
is the user's own trusted code, here as in the judge. Decides nothing.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tools.blame import STEPS, qualified_type

def replay(path: str, step: str, device: str, seed: int, init_seed: int, module_mode: str = "train") -> dict:
    """{"ok": true} or the first call of `step`'s replay that raised."""
    import torch
    from tools.problem import build_model, exec_module, make_inputs, read_problem
    dev = "cuda:0" if device == "cuda" else "cpu"
    p, src = read_problem(path)
    mod = model = inputs = None
    for name in STEPS[step][1]:
        try:
            if name == "import":
                mod = exec_module(p, src)
            elif name == "meta_init":
                with torch.device("meta"):
                    mod.get_init_inputs()
            elif name == "meta_inputs":
                with torch.device("meta"):
                    mod.get_inputs()
            elif name == "model":
                model = build_model(mod.Model, mod, init_seed, dev, module_mode)
            elif name == "inputs":
                inputs = make_inputs(mod, seed, dev)
            else:
                with torch.no_grad():
                    model(*inputs)
                if device == "cuda":
                    torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 - the problem's fault is this process's answer
            from tools.errors import describe_fault
            return {"ok": False, "step": name, "type": qualified_type(e), "fault": describe_fault(e)}
    return {"ok": True}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.recheck")
    ap.add_argument("problem")
    ap.add_argument("step", choices=tuple(STEPS))
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--init-seed", type=int, default=0)
    ap.add_argument("--module-mode", choices=("train", "eval"), default="train")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    result = replay(a.problem, a.step, a.device, a.seed, a.init_seed, a.module_mode)
    Path(a.out).write_text(json.dumps(result), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
