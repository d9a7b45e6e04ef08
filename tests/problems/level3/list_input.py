"""Level-3 style: a forward given a list of tensors as one input."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.fc = nn.Linear(dim, dim)

    def forward(self, xs):
        return self.fc(torch.stack(xs).sum(0))


def get_inputs():
    return [[torch.randn(3, 8) for _ in range(3)]]


def get_init_inputs():
    return [8]
