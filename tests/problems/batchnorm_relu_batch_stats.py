"""A Triton candidate for problems/batchnorm_relu.py that normalizes with the batch's
statistics (mean and biased variance over the batch, per channel), as BatchNorm does in
training mode, and updates the running statistics as it does (momentum 0.1, the variance
unbiased, the batch count): right under the default [eval] module_mode = "train"."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def bn_batch_relu_kernel(x_ptr, w_ptr, b_ptr, y_ptr, rm_ptr, rv_ptr, N, C: tl.constexpr, eps, momentum,
                         BLOCK_N: tl.constexpr):
    c = tl.program_id(0)
    rows = tl.arange(0, BLOCK_N)
    m = rows < N
    x = tl.load(x_ptr + rows * C + c, mask=m, other=0.0) * 2.0
    mean = tl.sum(x, axis=0) / N
    d = tl.where(m, x - mean, 0.0)
    ss = tl.sum(d * d, axis=0)
    w = tl.load(w_ptr + c)
    b = tl.load(b_ptr + c)
    y = d / tl.sqrt(ss / N + eps) * w + b
    tl.store(y_ptr + rows * C + c, tl.maximum(y, 0.0), mask=m)
    rm = tl.load(rm_ptr + c)
    rv = tl.load(rv_ptr + c)
    tl.store(rm_ptr + c, (1.0 - momentum) * rm + momentum * mean)
    tl.store(rv_ptr + c, (1.0 - momentum) * rv + momentum * ss / (N - 1))


@triton.jit
def count_kernel(n_ptr):
    tl.store(n_ptr, tl.load(n_ptr) + 1)


class ModelNew(nn.Module):
    def __init__(self, c: int):
        super().__init__()
        self.bn = nn.BatchNorm1d(c)
        self.c = c

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n_rows = x.shape[0]
        bn = self.bn
        bn_batch_relu_kernel[(self.c,)](x, bn.weight, bn.bias, y, bn.running_mean, bn.running_var, n_rows, self.c,
                                        bn.eps, bn.momentum, BLOCK_N=triton.next_power_of_2(n_rows))
        count_kernel[(1,)](bn.num_batches_tracked)
        return y
