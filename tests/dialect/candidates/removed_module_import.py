"""KernelBook format, but importing grid from torch._inductor.triton_heuristics, a module
that moved to torch._inductor.runtime in torch 2.3 (KernelLLM mixes the two up).
Verdict: compile_error; the feedback names the module and where to import from.
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
from torch._inductor.triton_heuristics import grid as grid_old

PROBLEM = "relu"
EXPECTED = "compile_error"


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
    with torch.cuda._DeviceGuard(0):
        torch.cuda.set_device(0)
        buf0 = empty_strided_cuda((16, 40), (40, 1), torch.float32)
        triton_poi_fused_relu_0[grid_old(640)](arg0_1, buf0, 640, XBLOCK=128, num_warps=4, num_stages=1)
    return buf0,


class ModelNew(nn.Module):
    def forward(self, input_0):
        output = call([input_0])
        return output[0]
