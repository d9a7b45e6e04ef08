"""Exact (erf) GELU on (8, 50) fp32: a pointwise kernel calling libdevice.erf."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x)


def get_inputs():
    return [torch.randn(8, 50)]


def get_init_inputs():
    return []
