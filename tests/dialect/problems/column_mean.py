"""Column means of a 300 x 40 matrix: a reduction over the strided (non-contiguous) dimension."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.mean(dim=0)


def get_inputs():
    return [torch.randn(300, 40)]


def get_init_inputs():
    return []
