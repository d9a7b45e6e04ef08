import torch
import torch.nn as nn


class Model(nn.Module):
    """A weight-normalised layer (torch.nn.utils.parametrizations.weight_norm swaps the
    Linear's class for a parametrized subclass when it is built) and a plain one."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 16)
        self.wn = nn.utils.parametrizations.weight_norm(nn.Linear(16, 8))

    def forward(self, x):
        return self.wn(torch.relu(self.lin(x)))


def get_inputs():
    return [torch.randn(4, 16)]


def get_init_inputs():
    return []
