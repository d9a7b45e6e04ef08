"""relu(BatchNorm1d(2x)): in training mode (as constructed, as KernelBench runs it) the
batch's statistics normalize; in eval mode a fresh BatchNorm is nearly the identity."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, c: int):
        super().__init__()
        self.bn = nn.BatchNorm1d(c)

    def forward(self, x):
        return torch.relu(self.bn(x * 2))


def get_inputs():
    return [torch.randn(16, 8)]


def get_init_inputs():
    return [8]
