"""KernelBook format whose kernel writes buf0 row-major but whose call() returns
reinterpret_tensor(buf0, (16, 40), (1, 16), 0): inside the buffer, but column-major, so
the output's elements come out in another order.
Verdict: incorrect; the feedback names the view's strides and the row-major ones.
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

PROBLEM = "relu"
EXPECTED = "incorrect"


@triton.jit
def triton_poi_fused_relu_0(in_ptr0, out_ptr0, xnumel, XBLOCK: tl.constexpr):
    xnumel = 640
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    xmask = xindex < xnumel
    x0 = xindex
    tmp0 = tl.load(in_ptr0 + (x0), xmask)
    tmp1 = tl.full([1], 0, tl.int32)
    tmp2 = triton_helpers.maximum(tmp1, tmp0)
    tl.store(out_ptr0 + (x0), tmp2, xmask)


def call(args):
    arg0_1, = args
    args.clear()
    assert_size_stride(arg0_1, (16, 40), (40, 1))
    with torch.cuda._DeviceGuard(0):
        torch.cuda.set_device(0)
        buf0 = empty_strided_cuda((16, 40), (40, 1), torch.float32)
        get_raw_stream(0)
        triton_poi_fused_relu_0[grid(640)](arg0_1, buf0, 640, XBLOCK=128, num_warps=4, num_stages=1)
        del arg0_1
    return reinterpret_tensor(buf0, (16, 40), (1, 16), 0),


class ModelNew(nn.Module):
    def forward(self, input_0):
        output = call([input_0])
        return output[0]
