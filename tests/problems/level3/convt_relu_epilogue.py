"""A decoder step: a transposed convolution then ReLU, and a 1-D convolution then ReLU."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, channels):
        super(Model, self).__init__()
        self.up = nn.ConvTranspose2d(channels, channels // 2, 3, stride=2, padding=1, output_padding=1)
        self.seq = nn.Conv1d(channels // 2, channels, 3, padding=1)

    def forward(self, x):
        y = torch.relu(self.up(x))
        return torch.relu(self.seq(y.flatten(2)))


def get_inputs():
    return [torch.randn(2, 8, 5, 5)]


def get_init_inputs():
    return [8]
