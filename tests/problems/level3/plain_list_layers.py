"""Level-3 style: layers kept in a plain Python list, not an nn.ModuleList, so their
parameters are not registered."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.layers = [nn.Linear(dim, dim) for _ in range(2)]

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


def get_inputs():
    return [torch.randn(3, 8)]


def get_init_inputs():
    return [8]
