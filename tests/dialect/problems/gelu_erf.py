"""Exact (erf) GELU of a 48 x 200 matrix: pointwise with libdevice.erf."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.gelu(x)


def get_inputs():
    return [torch.randn(48, 200)]


def get_init_inputs():
    return []
