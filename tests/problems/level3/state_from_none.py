"""Level-3 style: a running state that starts as None and that the forward reads once set
(`h = x if self.h is None else 0.5 * self.h + x`), and a tensor kept only for inspection."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim: int, read_back: bool = True):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.read_back = read_back
        self.h = None
        self.last = None

    def forward(self, x):
        y = self.fc(x)
        if self.read_back:
            y = y if self.h is None else 0.5 * self.h + y
            self.h = y
        self.last = y.detach()
        return y * 2


def get_inputs():
    return [torch.randn(3, 8)]


def get_init_inputs():
    return [8]
