"""A model whose __init__ reads tensor values (`.item()`, as Swin's drop-path schedule does):
it cannot be built on the meta device."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n, d):
        super().__init__()
        self.rates = [x.item() for x in torch.linspace(0, 0.1, n)]
        self.layers = nn.ModuleList([nn.Linear(d, d) for _ in range(n)])

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


def get_inputs():
    return [torch.randn(3, 8)]


def get_init_inputs():
    return [2, 8]
