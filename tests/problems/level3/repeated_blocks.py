"""A network of repeated residual blocks (conv, training-mode BatchNorm, ReLU), four equal
and one wider, as ResNets repeat their bottlenecks: captured block by block when its graph
is large, the equal blocks compiled once."""
import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)
        self.bn = nn.BatchNorm2d(c)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)) + x)


class Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.stem = nn.Conv2d(3, c, 3, padding=1)
        self.blocks = nn.Sequential(*[Block(c) for _ in range(4)])
        self.widen = nn.Conv2d(c, 2 * c, 1)
        self.wide = Block(2 * c)
        self.head = nn.Linear(2 * c, 5)

    def forward(self, x):
        x = self.wide(self.widen(self.blocks(self.stem(x))))
        return self.head(x.mean((2, 3)))


def get_inputs():
    return [torch.randn(2, 3, 8, 8)]


def get_init_inputs():
    return [4]
