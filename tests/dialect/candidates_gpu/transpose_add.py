"""KernelBook-format candidate for tests/dialect/problems/transpose_add.py (not model-written).

Produced by benchmarks/kernelbook_corpus.py: torch.compile of the problem's Model on
NVIDIA H100 80GB HBM3 (torch 2.11.0+cu130, triton 3.6.0), converted by
tools/dialect/kernelbook.py with launch configs from Inductor's heuristics; its ModelNew
matched Model there, in-process.

expect: correct
"""
import torch
import triton
import triton.language as tl
from torch._inductor.runtime.triton_heuristics import grid
from torch._C import _cuda_getCurrentRawStream as get_raw_stream
from torch._inductor.runtime import triton_helpers
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
import torch.nn as nn
assert_size_stride = torch._C._dynamo.guards.assert_size_stride
empty_strided_cuda = torch._C._dynamo.guards._empty_strided_cuda
reinterpret_tensor = torch._C._dynamo.guards._reinterpret_tensor


@triton.jit
def triton_poi_fused_add_t_0(in_ptr0, in_ptr1, out_ptr0, ynumel, xnumel, YBLOCK : tl.constexpr, XBLOCK : tl.constexpr):
    ynumel = 96
    xnumel = 80
    yoffset = tl.program_id(1) * YBLOCK
    yindex = yoffset + tl.arange(0, YBLOCK)[:, None]
    ymask = yindex < ynumel
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[None, :]
    xmask = xindex < xnumel
    x1 = xindex
    y0 = yindex
    tmp0 = tl.load(in_ptr0 + (x1 + 80*y0), xmask & ymask, eviction_policy='evict_last')
    tmp1 = tl.load(in_ptr1 + (y0 + 96*x1), xmask & ymask, eviction_policy='evict_last')
    tmp2 = tmp0 + tmp1
    tl.store(out_ptr0 + (x1 + 80*y0), tmp2, xmask & ymask)


def call(args):
    arg0_1, arg1_1 = args
    args.clear()
    assert_size_stride(arg0_1, (80, 96), (96, 1))
    assert_size_stride(arg1_1, (96, 80), (80, 1))
    with torch.cuda._DeviceGuard(0):
        torch.cuda.set_device(0)
        buf0 = empty_strided_cuda((96, 80), (80, 1), torch.float32)
        get_raw_stream(0)
        triton_poi_fused_add_t_0[grid(96, 80)](arg1_1, arg0_1, buf0, 96, 80, XBLOCK=32, YBLOCK=32, num_warps=4, num_stages=1)
        del arg0_1
        del arg1_1
    return (buf0,)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, input_0, input_1):
        arg0_1 = input_1
        arg1_1 = input_0
        output = call([arg0_1, arg1_1])
        return output[0]
