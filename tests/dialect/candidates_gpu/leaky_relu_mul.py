"""KernelBook-format candidate for tests/dialect/problems/leaky_relu_mul.py (not model-written).

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
def triton_poi_fused_leaky_relu_mul_0(in_ptr0, in_ptr1, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    xnumel = 16640
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    xmask = xindex < xnumel
    x0 = xindex
    tmp0 = tl.load(in_ptr0 + (x0), xmask)
    tmp1 = tl.load(in_ptr1 + (x0), xmask)
    tmp2 = tmp0 * tmp1
    tmp3 = tl.full([1], 0.0, tl.float32)
    tmp4 = tmp2 > tmp3
    tmp5 = tl.full([1], 0.2, tl.float32)
    tmp6 = tmp2 * tmp5
    tmp7 = tl.where(tmp4, tmp2, tmp6)
    tl.store(out_ptr0 + (x0), tmp7, xmask)


def call(args):
    arg0_1, arg1_1 = args
    args.clear()
    assert_size_stride(arg0_1, (4, 64, 65), (4160, 65, 1))
    assert_size_stride(arg1_1, (4, 64, 65), (4160, 65, 1))
    with torch.cuda._DeviceGuard(0):
        torch.cuda.set_device(0)
        buf0 = empty_strided_cuda((4, 64, 65), (4160, 65, 1), torch.float32)
        get_raw_stream(0)
        triton_poi_fused_leaky_relu_mul_0[grid(16640)](arg0_1, arg1_1, buf0, 16640, XBLOCK=256, num_warps=4, num_stages=1)
        del arg0_1
        del arg1_1
    return (buf0,)


class ModelNew(nn.Module):
    def __init__(self, negative_slope=0.1):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, input_0, input_1):
        arg0_1 = input_0
        arg1_1 = input_1
        output = call([arg0_1, arg1_1])
        return output[0]
