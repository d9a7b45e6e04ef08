"""Throughput benchmark candidate for examples/relu.py (from examples/relu.replay.jsonl): statically rejected: the fused kernel plus torch.relu doing the work"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def bias_relu_scale_kernel(x_ptr, bias_ptr, out_ptr, n_elements, n_cols, scale,
                           BLOCK_SIZE: tl.constexpr):
    # one pass over memory: load x once, add the bias, clamp, scale, store once
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    b = tl.load(bias_ptr + offsets % n_cols, mask=mask)
    y = tl.maximum(x + b, 0.0) * scale
    tl.store(out_ptr + offsets, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim, scale):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(dim))
        self.scale = scale

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n_elements = x.numel()
        grid = (triton.cdiv(n_elements, 4096),)
        bias_relu_scale_kernel[grid](x, self.bias, out, n_elements, x.shape[-1], self.scale,
                                     BLOCK_SIZE=4096, num_warps=8)
        return torch.relu(out)
