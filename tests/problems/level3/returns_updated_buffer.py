"""A running mean the forward updates in place and returns beside its output: Dynamo returns
the buffer from the module, not from the graph (named, with the copy that seeds it)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.register_buffer("ema", torch.zeros(d))

    def forward(self, x):
        y = self.fc(x)
        self.ema.mul_(0.5).add_(y.mean(0))
        return y * 2, self.ema


def get_inputs():
    return [torch.randn(4, 16)]


def get_init_inputs():
    return [16]
