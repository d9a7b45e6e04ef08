"""A 3x3 convolution without bias, 16 -> 128 channels on 16 images of 1024 x 1024
(gpu_conv2d_template was compiled from this shape with Inductor's Triton templates)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, cin: int, cout: int, k: int):
        super().__init__()
        self.conv2d = nn.Conv2d(cin, cout, (k, k), bias=False)

    def forward(self, x):
        return self.conv2d(x)


def get_inputs():
    return [torch.rand(16, 16, 1024, 1024)]


def get_init_inputs():
    return [16, 128, 3]
