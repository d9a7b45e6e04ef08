"""The problems and candidates of benchmarks/judge_stress.py: five small elementwise
problems (a short forward, so the judge captures its baselines in CUDA graphs) and, for
each, honest candidates and capture-hostile ones.

Every candidate launches a correct Triton kernel for its problem; the hostile ones add
what a CUDA-graph capture, in its worker or beside it in the judge, does not survive:

- honest:        the kernel alone (correct, timed with graph replays);
- honest_2d:     the same work on a 2-D grid (another kernel, another compile);
- equal_sync:    `x.equal(x)` in the forward: a host synchronisation (issue 49's case);
- device_sync:   `torch.cuda.synchronize()` in the forward: a device-wide wait;
- bool_sync:     `bool()` of an output element: a read back to the host;
- nonzero:       `y.nonzero()`, an op that cannot be captured (its size is read back);
- raising:       raises inside the forward once it is being timed (after 3 calls);
- wild_store:    stores far out of bounds on the GPU (an illegal address: the worker dies
                 and the judge checks its GPU again), nothing more on cpu;
- own_graph:     captures its own launch in a torch.cuda.CUDAGraph (a static guard refuses it);
- side_stream:   launches on a stream of its own (a static guard refuses it).

On cpu the CUDA-only tricks (own graph, side stream, a wild address) are done only where
the tensor is on cuda, so the same files judge there too. What each verdict is does not
matter here: the stress asks that it be the same under load as alone.
"""
from __future__ import annotations

from pathlib import Path

# name -> (torch expression of x, Triton expression of x, the input's shape)
PROBLEMS = {
    "relu": ("torch.relu(x)", "tl.maximum(x, 0.0)", (64, 512)),
    "double": ("x * 2.0", "x * 2.0", (32, 1000)),
    "shift": ("x + 1.0", "x + 1.0", (128, 256)),
    "absolute": ("torch.abs(x)", "tl.abs(x)", (16, 2048)),
    "square": ("x * x", "x * x", (100, 300)),
}

_PROBLEM = '''"""judge_stress: {name}, a short elementwise forward."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return {torch_expr}


def get_inputs():
    return [torch.randn{shape}]


def get_init_inputs():
    return []
'''

_HEAD = '''"""judge_stress candidate for {name}: {kind}."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def op_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(y_ptr + offs, {triton_expr}, mask=m)


def launch(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    n = x.numel()
    op_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
    return y

'''

_FORWARDS = {
    "honest": '''
class ModelNew(nn.Module):
    def forward(self, x):
        return launch(x)
''',
    "honest_2d": '''
@triton.jit
def op_kernel_2d(x_ptr, y_ptr, rows, cols, BLOCK: tl.constexpr):
    r = tl.program_id(0)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = offs < cols
    x = tl.load(x_ptr + r * cols + offs, mask=m)
    tl.store(y_ptr + r * cols + offs, {triton_expr}, mask=m)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        rows, cols = x.shape
        op_kernel_2d[(rows, triton.cdiv(cols, 256))](x, y, rows, cols, BLOCK=256)
        return y
''',
    "equal_sync": '''
class ModelNew(nn.Module):
    def forward(self, x):
        if not x.equal(x):
            raise ValueError("NaN in the input")
        return launch(x)
''',
    "device_sync": '''
class ModelNew(nn.Module):
    def forward(self, x):
        if x.is_cuda:
            torch.cuda.synchronize()
        return launch(x)
''',
    "bool_sync": '''
class ModelNew(nn.Module):
    def forward(self, x):
        y = launch(x)
        if bool(y[0, 0] != y[0, 0]):
            raise ValueError("NaN in the output")
        return y
''',
    "nonzero": '''
class ModelNew(nn.Module):
    def forward(self, x):
        y = launch(x)
        if y.nonzero().shape[0] > y.numel():
            raise ValueError("impossible")
        return y
''',
    "own_graph": '''
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.graphs = {{}}

    def forward(self, x):
        if not x.is_cuda:
            return launch(x)
        key = (x.data_ptr(), tuple(x.shape))
        if key not in self.graphs:
            launch(x)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                y = launch(x)
            self.graphs[key] = (graph, y)
        graph, y = self.graphs[key]
        graph.replay()
        return y
''',
    "side_stream": '''
class ModelNew(nn.Module):
    def forward(self, x):
        if not x.is_cuda:
            return launch(x)
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            y = launch(x)
        torch.cuda.current_stream().wait_stream(stream)
        return y
''',
    "raising": '''
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls > 3:
            raise RuntimeError("this forward gives up once it is timed")
        return launch(x)
''',
    "wild_store": '''
@triton.jit
def wild_kernel(x_ptr, y_ptr, n, far, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs + far, tl.load(x_ptr + offs, mask=m), mask=m)


class ModelNew(nn.Module):
    def forward(self, x):
        y = launch(x)
        if x.is_cuda:
            wild_kernel[(1,)](x, y, 16, 1 << 40, BLOCK=16)
        return y
''',
}
KINDS = tuple(_FORWARDS)
HOSTILE = tuple(k for k in KINDS if not k.startswith("honest"))


def write_cases(root: Path) -> dict[tuple[str, str], tuple[Path, Path]]:
    """Write every problem and candidate under `root`; {(problem, kind): (problem file,
    candidate file)}."""
    root.mkdir(parents=True, exist_ok=True)
    cases = {}
    for name, (torch_expr, triton_expr, shape) in PROBLEMS.items():
        problem = root / f"{name}.py"
        problem.write_text(_PROBLEM.format(name=name, torch_expr=torch_expr, shape=shape))
        for kind, forward in _FORWARDS.items():
            cand = root / f"{name}__{kind}.py"
            cand.write_text(_HEAD.format(name=name, kind=kind, triton_expr=triton_expr)
                            + forward.format(triton_expr=triton_expr))
            cases[(name, kind)] = (problem, cand)
    return cases
