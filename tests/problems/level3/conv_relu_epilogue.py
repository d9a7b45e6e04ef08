"""A VGG-like stack: convolutions each followed by a ReLU (one with no bias), a pooling between,
and a convolution whose output is read twice (its ReLU and a residual), which keeps its ReLU as a
kernel of its own."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, channels):
        super(Model, self).__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, channels, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(channels, channels, 3, padding=1, bias=False), nn.ReLU(inplace=True),
            nn.MaxPool2d(2))
        self.side = nn.Conv2d(channels, channels, 1)

    def forward(self, x):
        y = self.features(x)
        z = self.side(y)
        return torch.relu(z) + z


def get_inputs():
    return [torch.randn(2, 3, 8, 8)]


def get_init_inputs():
    return [16]
