import torch
import torch.nn as nn


class Model(nn.Module):
    """A running mean kept in a buffer updated in place by the forward (chained: the second op
    reads what the first returns), then read: compiled whole, not block by block."""

    def __init__(self, width=32):
        super().__init__()
        self.register_buffer("running", torch.zeros(width))
        self.proj = nn.Linear(width, width)

    def forward(self, x):
        self.running.mul_(0.9).add_(x.mean(0))
        return self.proj(x - self.running)


def get_inputs():
    return [torch.randn(64, 32)]


def get_init_inputs():
    return []
