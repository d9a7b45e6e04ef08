"""StyleGAN's equalized-learning-rate convolution: the bias the forward convolves with is computed
(bias * lr_mul), then ReLU; beside it a plain convolution and ReLU."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class EqualConv2d(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, padding=0, lr_mul=0.5):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_channels, in_channels, kernel_size, kernel_size))
        self.bias = nn.Parameter(torch.randn(out_channels))
        self.scale = 1 / math.sqrt(in_channels * kernel_size * kernel_size)
        self.lr_mul = lr_mul
        self.padding = padding

    def forward(self, x):
        return F.conv2d(x, self.weight * self.scale, self.bias * self.lr_mul, padding=self.padding)


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.equal = EqualConv2d(4, channels, 3, padding=1)
        self.plain = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x):
        return F.relu(self.plain(F.relu(self.equal(x))))


def get_inputs():
    return [torch.randn(2, 4, 8, 8)]


def get_init_inputs():
    return [8]
