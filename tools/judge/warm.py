"""torch's lazily imported modules, imported once per judge process before its threads run.

torch leaves its largest parts to their first use, and a judge's threads reach them from
different ends at once:

- `torch._dynamo` is imported by the first call of anything torch wraps in
  `torch._disable_dynamo` (torch/_compile.py): the python reference kernels that run on
  the meta device (load_problem's validation of a get_inputs() doing arithmetic), every
  TorchDispatchMode subclass (FlopCounterMode in tools/perf/roofline.py), the first
  torch.profiler session; importing it imports `torch._inductor.config` and
  `torch._inductor.utils` on the way;
- `torch._inductor` is imported by the torch.compile baseline (service.Judge's
  `_compile_baseline`: `import torch._inductor.config` first), and its package imports
  `torch._dynamo` on the way;
- sympy, through `torch.fx.experimental.symbolic_shapes`, by the first meta-device op;
  `torch.utils._device` by the first `with torch.device(...)` (tools/problem.py).

Two threads entering that cycle from its two ends each hold one module lock and wait for
the other's; Python breaks the deadlock by handing one of them a partially initialised
module ("cannot import name 'IndentedBuffer' from partially initialized module
'torch._inductor.utils'"), which is no fault of the problem file.

`warm_imports(device)` imports them once per process, under one lock: every judge host
calls it before its second thread can run (the service's serve(), `krefine run`'s loop,
a Ray judge actor, and each Judge before its baseline thread). "cpu" imports torch._dynamo
(with sympy and torch._inductor's config and utils); "cuda" adds torch._inductor's
compiler. Either is paid once per process, and only earlier: the judge's first threads
import the same modules anyway (the torch.compile baseline all of them). Module names
that another torch lacks are skipped and reported, never raised.

Does not cover imports made by a problem file's own code: a fault raised there is
confirmed in a fresh process before the file is blamed (tools/blame.py).
"""
from __future__ import annotations

import importlib
import threading
import time

# what each device's judge threads import lazily; every name is tried on its own, so one
# that another torch version moved is reported and the rest still imported
_MODULES = {
    "cpu": ("torch.utils._device",                     # `with torch.device(...)`
            "torch.fx.experimental.symbolic_shapes",   # the first meta-device op (sympy)
            "torch._dynamo"),                          # torch._disable_dynamo's first call
    "cuda": ("torch._inductor.config",                 # the torch.compile baseline
             "torch._inductor.utils",
             "torch._inductor.compile_fx",
             "torch._inductor.codegen.triton",
             "torch._inductor.runtime.triton_heuristics",
             "torch._inductor.async_compile",
             "torch._inductor.codecache",
             "torch.utils.flop_counter"),              # the profile step's FlopCounterMode
}

_LOCK = threading.Lock()
# module name -> "ok" or why it is missing ("ImportError: ..."), for every name tried
WARMED: dict[str, str] = {}


def warm_imports(device: str) -> float:
    """Import what a judge on `device` ("cpu" or "cuda") would import lazily; seconds
    spent in this call (0.0 once done: the names already tried are not tried again).
    Safe to call from any thread: a second caller waits for the first."""
    names = _MODULES["cpu"] + (_MODULES["cuda"] if device == "cuda" else ())
    with _LOCK:
        todo = [n for n in names if n not in WARMED]
        t = time.perf_counter()
        for name in todo:
            try:
                importlib.import_module(name)
                WARMED[name] = "ok"
            except Exception as e:  # noqa: BLE001 - an absent or broken part is reported, not fatal
                WARMED[name] = f"{type(e).__name__}: {' '.join(str(e).split())[:200]}"
        return time.perf_counter() - t if todo else 0.0
