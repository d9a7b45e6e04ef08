"""Problem for the throughput benchmark: an odd-sized matmul, (333 x 517) @ (517 x 271) fp32.

Small (a ~10 us kernel on an H100), with no dimension a multiple of a tile, so a
candidate that forgets a mask is wrong at the edges."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


M, K, N = 333, 517, 271


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
