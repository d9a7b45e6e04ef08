import torch
import torch.nn as nn

class Model(nn.Module):
    """A forward compiled in __init__: torch.compile of a helper method."""

    def __init__(self, d=8):
        super().__init__()
        self.lin = nn.Linear(d, d)
        self._f = torch.compile(self._inner)

    def _inner(self, x):
        return torch.relu(self.lin(x)) + 1.0

    def forward(self, x):
        return self._f(x)

def get_inputs():
    return [torch.randn(4, 8)]

def get_init_inputs():
    return []
