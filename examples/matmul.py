"""Square matrix multiplication, C = A @ B, with 512 x 512 fp32 matrices.

A tiled kernel with a K loop: the first problem here that is compute-bound rather
than memory-bound. Small enough that a 64 x 64-tile candidate runs in Triton's
interpreter on CPU in seconds; on a GPU, expect cuBLAS to be a hard baseline.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


n = 512


def get_inputs():
    return [torch.randn(n, n), torch.randn(n, n)]


def get_init_inputs():
    return []
