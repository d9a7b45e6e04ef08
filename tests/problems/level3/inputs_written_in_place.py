"""A forward that writes two of its inputs in place before reading them (a slice zeroed, a clamp_),
returns one of them as it leaves it, and a value computed from the other: the seed writes copies
of the inputs, so that the caller's tensors are left as they came, which the judge requires of every
candidate, and returns the copy where Model returns its input."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.proj = nn.Linear(features, features)

    def forward(self, x, y):
        x[:, :2] = 0.0
        y.clamp_(min=0)
        return y, self.proj(x).sum(1), x.t()


def get_inputs():
    return [torch.randn(4, 8), torch.randn(4, 8)]


def get_init_inputs():
    return [8]
