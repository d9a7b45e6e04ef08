"""Level-3 style: a forward taking Python values beside its tensor: a scale, an offset, a
flag choosing a branch, and None."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.fc = nn.Linear(dim, dim)

    def forward(self, x, alpha, k, flag, unused):
        y = self.fc(x) * alpha + k
        if flag:
            y = torch.relu(y)
        return y


def get_inputs():
    return [torch.randn(4, 8), 0.5, 3, True, None]


def get_init_inputs():
    return [8]
