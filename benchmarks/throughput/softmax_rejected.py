"""Throughput benchmark candidate for examples/softmax.py: statically rejected (a Triton
kernel with a try/except fallback to torch.softmax)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        try:
            out = torch.empty_like(x)
            copy_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
            raise RuntimeError("fall back")
        except RuntimeError:
            return torch.softmax(x, dim=-1)
