"""A seed's ModelNew built once before it is handed on (tools/dialect/kernelbook.py
`accepted_seed`): a seed carries the problem's module classes for set-up only, without their
forward, and a Model.__init__ that runs one (a dummy call sizing a head, a custom
parametrization) would fail only when the judge builds it."""
from __future__ import annotations

import re


class SetUpRunsForward(ValueError):
    """Model's set-up runs the forward of `cls`, a module class of the problem's own that the
    seed carried without it."""

    def __init__(self, cls: str):
        super().__init__(f"Model's set-up runs {cls}'s forward while it builds (a dummy call, a parametrization), "
                         "and a seed carries the problem's module classes for set-up only, without a forward")
        self.cls = cls


def check_builds(problem, code: str) -> None:
    """ModelNew of the seed `code` is built from get_init_inputs() as the judge builds it (on
    the meta device, or the cpu where set-up reads a value); ValueError naming why not: a
    seed carries the problem's module classes for set-up only, without their forward."""
    import importlib.util
    import sys
    import tempfile
    from pathlib import Path

    import torch

    from tools.problem import split_init
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "krefine_seed_build.py"
        path.write_text(code, encoding="utf-8")   # Triton's jit reads each kernel's source from its file
        spec = importlib.util.spec_from_file_location(path.stem, path)
        seed = importlib.util.module_from_spec(spec)
        sys.modules[path.stem] = seed
        try:
            spec.loader.exec_module(seed)
            args, kwargs = split_init(problem.module.get_init_inputs())
            try:
                with torch.device("meta"):
                    seed.ModelNew(*args, **kwargs)
            except Exception:   # noqa: BLE001 - a value read on meta: the cpu has one
                with torch.no_grad():
                    seed.ModelNew(*args, **kwargs)
        except Exception as e:   # noqa: BLE001 - named, the seed refused
            why = str(e).strip().splitlines()[0] if str(e).strip() else ""
            carried = re.search(r"Module \[(\w+)\] is missing the required \"forward\"|^(\w+) is set-up only in a seed",
                                why)
            if carried:
                raise SetUpRunsForward(carried.group(1) or carried.group(2)) from None
            raise ValueError(f"the seed's ModelNew cannot be built from get_init_inputs(): {type(e).__name__}: "
                             f"{why[:200]}") from None
        finally:
            sys.modules.pop(path.stem, None)
