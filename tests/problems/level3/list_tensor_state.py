"""A running sum kept in a plain Python list: model.to() and state_dict pass it by, and no
name of Model's reaches it (named by its path)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.cache = [torch.zeros(d)]

    def forward(self, x):
        self.cache[0].add_(x.mean(0))
        return self.fc(x) + self.cache[0]


def get_inputs():
    return [torch.randn(4, 16)]


def get_init_inputs():
    return [16]
