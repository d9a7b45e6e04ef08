"""A grouped, strided, dilated 1-D convolution followed by a sigmoid (tanh would be libdevice, which the interpreter lacks)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(32, 16, 3, stride=2, padding=2, dilation=2, groups=2)

    def forward(self, x):
        return torch.sigmoid(self.conv(x))


def get_inputs():
    return [torch.randn(2, 32, 19)]


def get_init_inputs():
    return []
