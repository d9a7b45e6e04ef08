"""A Triton candidate for problems/batchnorm_relu.py that applies BatchNorm as eval mode
does, on the running statistics (a fresh module's: mean 0, variance 1): right only
under [eval] module_mode = "eval"."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def bn_running_relu_kernel(x_ptr, mean_ptr, var_ptr, w_ptr, b_ptr, y_ptr, n, C: tl.constexpr, eps,
                           BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    c = offs % C
    x = tl.load(x_ptr + offs, mask=m) * 2.0
    mean = tl.load(mean_ptr + c, mask=m)
    var = tl.load(var_ptr + c, mask=m)
    w = tl.load(w_ptr + c, mask=m)
    b = tl.load(b_ptr + c, mask=m)
    y = (x - mean) / tl.sqrt(var + eps) * w + b
    tl.store(y_ptr + offs, tl.maximum(y, 0.0), mask=m)


class ModelNew(nn.Module):
    def __init__(self, c: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(c))
        self.bias = nn.Parameter(torch.zeros(c))
        self.register_buffer("running_mean", torch.zeros(c))
        self.register_buffer("running_var", torch.ones(c))
        self.c = c

    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        bn_running_relu_kernel[(triton.cdiv(n, 128),)](x, self.running_mean, self.running_var, self.weight,
                                                       self.bias, y, n, self.c, 1e-5, BLOCK=128)
        return y
