"""KernelBook-format candidate for tests/dialect/problems/linear_relu.py (not model-written).

Produced by benchmarks/kernelbook_corpus.py: torch.compile of the problem's Model on
NVIDIA H100 80GB HBM3 (torch 2.11.0+cu130, triton 3.6.0), converted by
tools/dialect/kernelbook.py with launch configs from Inductor's heuristics; its ModelNew
matched Model there, in-process.

expect: rejected extern_kernels.mm
"""
import torch
from torch._inductor.select_algorithm import extern_kernels
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
def triton_poi_fused_addmm_relu_0(in_out_ptr0, in_ptr0, xnumel, XBLOCK : tl.constexpr):
    xnumel = 2048
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    xmask = xindex < xnumel
    x0 = (xindex % 64)
    x2 = xindex
    tmp0 = tl.load(in_ptr0 + (x0), xmask, eviction_policy='evict_last')
    tmp1 = tl.load(in_out_ptr0 + (x2), xmask)
    tmp2 = tmp0 + tmp1
    tmp3 = tl.full([1], 0, tl.int32)
    tmp4 = triton_helpers.maximum(tmp3, tmp2)
    tl.store(in_out_ptr0 + (x2), tmp4, xmask)


def call(args):
    arg0_1, arg1_1, arg2_1 = args
    args.clear()
    assert_size_stride(arg0_1, (64, 96), (96, 1))
    assert_size_stride(arg1_1, (64,), (1,))
    assert_size_stride(arg2_1, (32, 96), (96, 1))
    with torch.cuda._DeviceGuard(0):
        torch.cuda.set_device(0)
        buf0 = empty_strided_cuda((32, 64), (64, 1), torch.float32)
        extern_kernels.mm(arg2_1, reinterpret_tensor(arg0_1, (96, 64), (1, 96), 0), out=buf0)
        del arg0_1
        del arg2_1
        buf1 = buf0
        del buf0
        get_raw_stream(0)
        triton_poi_fused_addmm_relu_0[grid(2048)](buf1, arg1_1, 2048, XBLOCK=256, num_warps=4, num_stages=1)
        del arg1_1
    return (buf1,)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, input_0):
        arg0_1 = self.linear.weight
        arg1_1 = self.linear.bias
        arg2_1 = input_0
        output = call([arg0_1, arg1_1, arg2_1])
        return output[0]
