"""Row-wise softmax over the last dimension of a 1024 x 2048 fp32 matrix.

A reduction per row (max, then sum of exponentials): the classic first Triton kernel
beyond elementwise work. 2048 columns fit one block per row; the shape keeps a
Triton-interpreter run on CPU to a few seconds.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


batch, dim = 64, 2048   # small enough for Triton's CPU interpreter; a GPU takes any size


def get_inputs():
    return [torch.randn(batch, dim)]


def get_init_inputs():
    return []
