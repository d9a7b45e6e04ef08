"""The guard on what a kernel file needs to run elsewhere: `check_private_runtime`.

What krefine judges is the file a user takes away (tools/dialect/portable.py converts
KernelBook's torch-2.5 runtime before judging). A reference that conversion could not
rewrite, into torch's private compiler and tracer modules (`torch._inductor`,
`torch._dynamo`, `torch._C._dynamo`), changes or disappears between torch releases
(`grid` left `triton_heuristics` in torch 2.7), so a file that leans on one is refused
by name. The torch <= 2.2 paths of the same modules do not exist in any supported torch:
their import fails and tools/dialect/causes.py names the path to use instead; and
`extern_kernels` is library work, which tools/guards/torch_ops.py rejects with advice.
"""
from __future__ import annotations

import ast

from tools.guards.source import Finding, Source, line_of, path_hits, spell, under
from tools.settings import GuardSettings

PRIVATE = ("torch._inductor", "torch._dynamo", "torch._C._dynamo", "torch._C._cuda_getCurrentRawStream")
_MISSING = ("torch._inductor.triton_heuristics", "torch._inductor.triton_helpers")
# cuBLAS / cuDNN calls: tools/guards/torch_ops.py rejects them as library work, with advice
_LIBRARY = ("torch._inductor.select_algorithm.extern_kernels",)


def check_private_runtime(source: Source, settings: GuardSettings) -> Finding | None:
    for path, node in path_hits(source, PRIVATE):
        if under(path, _MISSING + _LIBRARY):
            continue
        what = f"import {path}" if isinstance(node, (ast.Import, ast.ImportFrom)) else spell(source, node)
        return Finding("private_runtime",
                       f"`{what}` is torch's private runtime, which changes between torch releases: the "
                       "kernel file must run with only torch and triton; write the helper in the file "
                       "(plain torch, or a @triton.jit function).", line_of(node), True, "private_runtime")
    return None
