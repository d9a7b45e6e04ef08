"""A strided transposed convolution with output padding, a bias and an epilogue (scale, ReLU)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, cin, cout, k, stride, padding, output_padding):
        super().__init__()
        self.conv = nn.ConvTranspose2d(cin, cout, k, stride=stride, padding=padding, output_padding=output_padding)

    def forward(self, x):
        return torch.relu(self.conv(x) * 0.5)


def get_inputs():
    return [torch.randn(2, 4, 5, 6)]


def get_init_inputs():
    return [4, 3, 3, 2, 1, 1]
