"""Dropout(p=0.5) of 2x: random in training mode (as constructed, as KernelBench runs
it), the identity on 2x in eval mode."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, p: float):
        super().__init__()
        self.drop = nn.Dropout(p=p)

    def forward(self, x):
        return self.drop(x * 2)


def get_inputs():
    return [torch.randn(16, 8)]


def get_init_inputs():
    return [0.5]
