"""3 * x + 1 over exactly 1000 elements: a shape-specialised kernel whose xnumel = 1000 is hard-coded in its body."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return 3.0 * x + 1.0


def get_inputs():
    return [torch.randn(1000)]


def get_init_inputs():
    return []
