import torch
import torch.nn as nn

class Model(nn.Module):
    """A LazyLinear never called in __init__: its weight is drawn at the first forward."""

    def __init__(self, hidden=6):
        super().__init__()
        self.a = nn.LazyLinear(hidden)

    def forward(self, x):
        return torch.relu(self.a(x))

def get_inputs():
    return [torch.randn(4, 8)]

def get_init_inputs():
    return []
