"""nn.Bilinear (aten._trilinear), a median along a dim with its index, and a k-th value: ops
Inductor leaves to PyTorch, which the capture rewrites (tools/dialect/fallback_rewrite.py)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.bil = nn.Bilinear(10, 12, 7)

    def forward(self, a, b):
        y = self.bil(a, b)
        med = torch.median(y, dim=-1)
        return y - med.values.unsqueeze(-1), med.indices, torch.kthvalue(y, 2, dim=0).values


def get_inputs():
    return [torch.randn(9, 10), torch.randn(9, 12)]


def get_init_inputs():
    return []
