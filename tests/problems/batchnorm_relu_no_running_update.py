"""A Triton candidate for problems/batchnorm_relu.py that normalizes with the batch's
statistics (mean and biased variance over the batch, per channel), as BatchNorm does in
training mode, but keeps no running statistics: its outputs are right, the module it
leaves is not (Model's BatchNorm updates running_mean, running_var and
num_batches_tracked), so it is incorrect (tools/judge/state_check.py)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def bn_batch_relu_kernel(x_ptr, w_ptr, b_ptr, y_ptr, N, C: tl.constexpr, eps, BLOCK_N: tl.constexpr):
    c = tl.program_id(0)
    rows = tl.arange(0, BLOCK_N)
    m = rows < N
    x = tl.load(x_ptr + rows * C + c, mask=m, other=0.0) * 2.0
    mean = tl.sum(x, axis=0) / N
    d = tl.where(m, x - mean, 0.0)
    var = tl.sum(d * d, axis=0) / N
    w = tl.load(w_ptr + c)
    b = tl.load(b_ptr + c)
    y = d / tl.sqrt(var + eps) * w + b
    tl.store(y_ptr + rows * C + c, tl.maximum(y, 0.0), mask=m)


class ModelNew(nn.Module):
    def __init__(self, c: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(c))
        self.bias = nn.Parameter(torch.zeros(c))
        self.c = c

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n_rows = x.shape[0]
        bn_batch_relu_kernel[(self.c,)](x, self.weight, self.bias, y, n_rows, self.c, 1e-5,
                                        BLOCK_N=triton.next_power_of_2(n_rows))
        return y
