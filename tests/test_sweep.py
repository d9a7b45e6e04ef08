"""agent/loop/sweep.py: variants that change only launch constants.

Each test reads the variants' ASTs with its own diff (below), not the module's, so a
variant that changed anything else would fail here even if the module's self-check
were broken.
"""
from __future__ import annotations

import ast
import json

from agent.loop.sweep import changed_constants, sweep_variants
from run_fixtures import REPO

KERNELBOOK = '''\
import torch
import triton
import triton.language as tl
from torch._inductor.runtime.triton_heuristics import grid
import torch.nn as nn


@triton.jit
def triton_poi_fused_relu_0(in_ptr0, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    xnumel = 256
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    xmask = xindex < xnumel
    tmp0 = tl.load(in_ptr0 + (xindex), xmask)
    tl.store(out_ptr0 + (xindex), tl.maximum(tmp0, 0.0), xmask)


def call(args):
    arg0_1, = args
    buf0 = torch.empty_like(arg0_1)
    triton_poi_fused_relu_0[grid(256)](arg0_1, buf0, 256, XBLOCK=256, num_warps=4, num_stages=1)
    return (buf0,)


class ModelNew(nn.Module):
    def forward(self, input_0):
        return call([input_0])[0]
'''

HAND_WRITTEN_LOCAL = '''\
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK_SIZE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=offs < n), 0.0), mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        BLOCK_SIZE = 1024
        relu_kernel[(triton.cdiv(n, BLOCK_SIZE),)](x, y, n, BLOCK_SIZE=BLOCK_SIZE)
        return y
'''

NOTHING_TO_SWEEP = '''\
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK_SIZE: tl.constexpr, HAS_MASK: tl.constexpr):
    RBLOCK: tl.constexpr = 64
    offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=offs < n), 0.0), mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        block = triton.next_power_of_2(x.shape[-1])
        relu_kernel[(x.shape[0],)](x, y, x.numel(), BLOCK_SIZE=block, HAS_MASK=1)
        return y
'''


def _constant_diff(original: str, variant: str) -> list[tuple[int, int, object, object]]:
    """(line, col, old, new) of every constant that differs; fails the test when the two
    trees differ in anything else."""
    a, b = ast.parse(original), ast.parse(variant)
    na, nb = list(ast.walk(a)), list(ast.walk(b))
    assert [type(n) for n in na] == [type(n) for n in nb]
    diffs = []
    for x, y in zip(na, nb):
        if isinstance(x, ast.Constant) and x.value != y.value:
            diffs.append((x.lineno, x.col_offset, x.value, y.value))
        elif not isinstance(x, ast.Constant):
            fields = lambda n: {k: v for k, v in ast.iter_fields(n) if not isinstance(v, (ast.AST, list))}
            assert fields(x) == fields(y), ast.dump(x)
    return diffs


def _launch_line(src: str, needle: str) -> int:
    return next(i for i, line in enumerate(src.splitlines(), 1) if needle in line)


def test_kernelbook_variants_change_only_the_launch_keywords():
    variants = sweep_variants(KERNELBOOK, 10)
    launch = _launch_line(KERNELBOOK, "triton_poi_fused_relu_0[grid")
    assert variants
    for v in variants:
        diffs = _constant_diff(KERNELBOOK, v.source)
        assert diffs and all(line == launch and type(old) is int for line, _, old, _ in diffs), v.change
        assert {old for _, _, old, _ in diffs} <= {256, 4, 1}, v.change   # XBLOCK, num_warps, num_stages only
        compile(v.source, "variant.py", "exec")


def test_inductor_grid_sizes_are_never_changed():
    for v in sweep_variants(KERNELBOOK, 10):
        assert "[grid(256)](arg0_1, buf0, 256," in v.source, v.change


def test_kernelbook_neighbours_are_block_x2_and_half_warps_and_stages():
    changes = [v.change for v in sweep_variants(KERNELBOOK, 10)]
    assert changes == ["triton_poi_fused_relu_0: XBLOCK 256->512", "triton_poi_fused_relu_0: num_warps 4->8",
                       "triton_poi_fused_relu_0: num_stages 1->2", "triton_poi_fused_relu_0: XBLOCK 256->128",
                       "triton_poi_fused_relu_0: num_warps 4->2",
                       "triton_poi_fused_relu_0: XBLOCK 256->512, num_warps 4->8",
                       "triton_poi_fused_relu_0: XBLOCK 256->128, num_warps 4->2"]


def test_variants_are_capped_and_deterministic():
    first = sweep_variants(KERNELBOOK, 3)
    assert [v.change for v in first] == [v.change for v in sweep_variants(KERNELBOOK, 10)][:3]
    assert [v.source for v in first] == [v.source for v in sweep_variants(KERNELBOOK, 3)]
    assert sweep_variants(KERNELBOOK, 0) == []


def test_grid_literal_and_launch_keyword_change_together():
    src = (REPO / "tests" / "problems" / "relu_ok.py").read_text()
    variant = sweep_variants(src, 1)[0]
    assert variant.change == "relu_kernel: BLOCK 1024->2048"
    assert [(old, new) for _, _, old, new in _constant_diff(src, variant.source)] == [(1024, 2048), (1024, 2048)]
    assert "relu_kernel[(triton.cdiv(n, 2048),)](x, y, n, BLOCK=2048)" in variant.source


def test_a_grid_bound_to_a_local_name_changes_with_the_keyword():
    completion = json.loads((REPO / "examples" / "relu.replay.jsonl").read_text().splitlines()[0])["completion"]
    src = completion.split("```python\n")[1].split("```")[0]
    halved = next(v for v in sweep_variants(src, 10) if v.change == "bias_relu_scale_kernel: BLOCK_SIZE 4096->2048")
    assert "grid = (triton.cdiv(n_elements, 2048),)" in halved.source and "BLOCK_SIZE=2048" in halved.source
    assert len(_constant_diff(src, halved.source)) == 2


def test_a_constant_bound_once_to_a_local_name_changes_at_its_assignment():
    variants = sweep_variants(HAND_WRITTEN_LOCAL, 10)
    assert [v.change for v in variants] == ["relu_kernel: BLOCK_SIZE 1024->2048", "relu_kernel: BLOCK_SIZE 1024->512"]
    line = _launch_line(HAND_WRITTEN_LOCAL, "BLOCK_SIZE = 1024")
    assert [(ln, old, new) for ln, _, old, new in _constant_diff(HAND_WRITTEN_LOCAL, variants[0].source)] == \
        [(line, 1024, 2048)]


def test_a_name_bound_twice_is_not_swept():
    src = HAND_WRITTEN_LOCAL.replace("        BLOCK_SIZE = 1024\n", "        BLOCK_SIZE = 1024\n        BLOCK_SIZE = 512\n")
    assert sweep_variants(src, 10) == []


def test_a_source_with_no_launch_constant_gives_no_variants():
    assert sweep_variants(NOTHING_TO_SWEEP, 10) == []
    assert sweep_variants("class ModelNew: pass\n", 10) == []
    assert sweep_variants("def broken(:\n", 10) == []


def test_an_autotuned_kernel_is_left_alone():
    src = KERNELBOOK.replace("@triton.jit\n", "@triton.autotune(configs=[], key=[])\n@triton.jit\n")
    assert sweep_variants(src, 10) == []


def test_two_block_sizes_sharing_a_grid_literal_change_together():
    src = '''\
import triton
import triton.language as tl


@triton.jit
def add_kernel(a, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pass


def launch(a, M, N):
    add_kernel[(triton.cdiv(M, 64), triton.cdiv(N, 64))](a, M, N, BLOCK_M=64, BLOCK_N=64, num_warps=4)
'''
    variants = sweep_variants(src, 10)
    assert variants[0].change == "add_kernel: BLOCK_M+BLOCK_N 64->128"
    assert "add_kernel[(triton.cdiv(M, 128), triton.cdiv(N, 128))](a, M, N, BLOCK_M=128, BLOCK_N=128" in variants[0].source


def test_a_rounded_up_floor_division_grid_changes_both_its_literals():
    src = (REPO / "tests" / "problems" / "relu_ok.py").read_text().replace(
        "(triton.cdiv(n, 1024),)", "((n + 1023) // 1024,)")
    halved = sweep_variants(src, 2)[1]
    assert "relu_kernel[((n + 511) // 512,)](x, y, n, BLOCK=512)" in halved.source


def test_changed_constants_refuses_a_source_that_differs_in_code():
    assert changed_constants("x = f(1)\n", "x = f(2)\n") == [(1, 6, 1, 2)]
    assert changed_constants("x = f(1)\n", "x = g(1)\n") is None
    assert changed_constants("x = f(1)\n", "x = f(1, 2)\n") is None
