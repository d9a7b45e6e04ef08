"""ReLU after a bias add, then a scale: three elementwise kernels in eager PyTorch,
one when fused into a Triton kernel.

x is 2047 x 2049 fp32 (about 4M elements): large enough that GPU timings measure
memory traffic rather than launch overhead, small enough that Triton's interpreter
runs a candidate on CPU in about a second. Both sizes are odd, so the element count
is not a multiple of any power-of-two block size: a kernel that forgets its mask or
rounds its grid down gets a wrong tail.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim: int, scale: float):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(dim))
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x + self.bias) * self.scale


batch, dim, scale = 2047, 2049, 0.5


def get_inputs():
    return [torch.randn(batch, dim)]


def get_init_inputs():
    return [dim, scale]
