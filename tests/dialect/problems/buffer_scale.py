"""x * w + c with w a registered buffer and c a parameter: the candidate must pass buffers and parameters to call()."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.register_buffer("w", torch.linspace(-1.0, 1.0, features))
        self.c = nn.Parameter(torch.randn(features))

    def forward(self, x):
        return x * self.w + self.c


def get_inputs():
    return [torch.randn(50, 77)]


def get_init_inputs():
    return [77]
