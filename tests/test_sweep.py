"""agent/search/sweep.py: variants that change only launch constants.

Each test reads the variants' ASTs with its own diff (below), not the module's, so a
variant that changed anything else would fail here even if the module's self-check
were broken.
"""
from __future__ import annotations

import ast
import json

from agent.search.sweep import changed_constants, sweep_variants
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


# Inductor's matmul template as a max-autotune seed has it (level 2's 12_Gemm_Multiply_LeakyReLU)
GEMM_TEMPLATE = 'import torch\nimport triton\nimport triton.language as tl\n\n\n@triton.jit\ndef triton_tem_fused_addmm_t_0(arg_A, arg_B, out_ptr0):\n    EVEN_K : tl.constexpr = True\n    USE_FAST_ACCUM : tl.constexpr = False\n    ACC_TYPE : tl.constexpr = tl.float32\n    BLOCK_M : tl.constexpr = 64\n    BLOCK_N : tl.constexpr = 128\n    BLOCK_K : tl.constexpr = 32\n    GROUP_M : tl.constexpr = 8\n    ALLOW_TF32 : tl.constexpr = False\n    INDEX_DTYPE : tl.constexpr = tl.int32\n    A = arg_A\n    B = arg_B\n\n    M = 1024\n    N = 8192\n    K = 8192\n    if M * N == 0:\n        # early exit due to zero-size input(s)\n        return\n    stride_am = 8192\n    stride_ak = 1\n    stride_bk = 1\n    stride_bn = 8192\n\n    # based on triton.ops.matmul\n    pid = tl.program_id(0).to(INDEX_DTYPE)\n    grid_m = (M + BLOCK_M - 1) // BLOCK_M\n    grid_n = (N + BLOCK_N - 1) // BLOCK_N\n\n    # re-order program ID for better L2 performance\n    width = GROUP_M * grid_n\n    group_id = pid // width\n    group_size = min(grid_m - group_id * GROUP_M, GROUP_M)\n    pid_m = group_id * GROUP_M + (pid % group_size)\n    pid_n = (pid % width) // (group_size)\n    tl.assume(pid_m >= 0)\n    tl.assume(pid_n >= 0)\n\n    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)\n    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)\n    if ((stride_am == 1 and stride_ak == M) or (stride_am == K and stride_ak == 1)) and (M >= BLOCK_M and K > 1):\n        offs_a_m = tl.max_contiguous(tl.multiple_of(rm % M, BLOCK_M), BLOCK_M)\n    else:\n        offs_a_m = rm % M\n    if ((stride_bk == 1 and stride_bn == K) or (stride_bk == N and stride_bn == 1)) and (N >= BLOCK_N and K > 1):\n        offs_b_n = tl.max_contiguous(tl.multiple_of(rn % N, BLOCK_N), BLOCK_N)\n    else:\n        offs_b_n = rn % N\n    offs_k = tl.arange(0, BLOCK_K)\n    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=ACC_TYPE)\n\n    for k_idx in range(0, tl.cdiv(K, BLOCK_K)):\n\n        a_k_idx_vals = offs_k[None, :] + (k_idx * BLOCK_K)\n        b_k_idx_vals = offs_k[:, None] + (k_idx * BLOCK_K)\n\n        idx_m = offs_a_m[:, None]\n        idx_n = a_k_idx_vals\n        xindex = idx_n + 8192*idx_m\n        a = tl.load(A + (xindex))\n\n        idx_m = b_k_idx_vals\n        idx_n = offs_b_n[None, :]\n        xindex = idx_n + 8192*idx_m\n        b = tl.load(B + ((tl.broadcast_to(idx_m + 8192*idx_n, [BLOCK_K, BLOCK_N])).broadcast_to(xindex.shape)))\n\n\n        acc += tl.dot(a, b, allow_tf32=ALLOW_TF32, out_dtype=ACC_TYPE)\n\n\n    # rematerialize rm and rn to save registers\n    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)\n    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)\n    idx_m = rm[:, None]\n    idx_n = rn[None, :]\n    mask = (idx_m < M) & (idx_n < N)\n\n    # inductor generates a suffix\n    xindex = idx_n + 8192*idx_m\n    tl.store(out_ptr0 + (tl.broadcast_to(xindex, [BLOCK_M, BLOCK_N])), acc, mask)\n\n\ndef call(args):\n    arg0_1, arg2_1 = args\n    buf0 = torch.empty_strided((1024, 8192), (8192, 1), dtype=torch.float32, device=arg0_1.device)\n    triton_tem_fused_addmm_t_0[1024, 1, 1](arg2_1, arg0_1, buf0, num_warps=4, num_stages=3)\n    return (buf0,)\n'


def _tiles(source: str) -> dict[str, int]:
    tree = ast.parse(source)
    kernel = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("triton_tem"))
    out = {s.target.id: s.value.value for s in kernel.body
           if isinstance(s, ast.AnnAssign) and isinstance(s.value, ast.Constant) and type(s.value.value) is int}
    launch = next(n for n in ast.walk(tree) if isinstance(n, ast.Subscript) and getattr(n.value, "id", "") == kernel.name)
    out["grid"] = launch.slice.elts[0].value
    return out


def test_the_first_variant_of_a_source_with_exact_dots_sets_them_to_tf32x3():
    first = sweep_variants(GEMM_TEMPLATE, 1)[0]
    assert first.change == "tl.dot ieee->tf32x3"
    assert 'input_precision="tf32x3"' in first.source and "allow_tf32=ALLOW_TF32" not in first.source


def test_a_template_tile_move_recomputes_its_grid():
    for v in sweep_variants(GEMM_TEMPLATE, 200, wide=True):
        t = _tiles(v.source)
        assert t["grid"] == -(-1024 // t["BLOCK_M"]) * -(-8192 // t["BLOCK_N"]), v.change


def test_block_k_moves_only_to_divisors_of_k_while_loads_are_unmasked():
    ks = {_tiles(v.source)["BLOCK_K"] for v in sweep_variants(GEMM_TEMPLATE, 200, wide=True)}
    assert ks <= {16, 32, 64} and 8192 % max(ks) == 0 and len(ks) > 1


def test_wide_adds_pairs_of_one_kernels_constants_after_the_singles():
    narrow = sweep_variants(GEMM_TEMPLATE, 500)
    wide = sweep_variants(GEMM_TEMPLATE, 500, wide=True)
    assert len(wide) > 3 * len(narrow) and [v.change for v in wide[:len(narrow)]] == [v.change for v in narrow]
