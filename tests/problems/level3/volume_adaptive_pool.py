"""A 3-D convolution into AdaptiveAvgPool3d to sizes that do not divide the volume
(aten._adaptive_avg_pool3d: Inductor leaves it to PyTorch whatever the sizes)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv3d(3, 4, 3, padding=1)
        self.pool = nn.AdaptiveAvgPool3d((2, 3, 1))

    def forward(self, x):
        return self.pool(torch.relu(self.conv(x)))


def get_inputs():
    return [torch.randn(2, 3, 6, 5, 6)]


def get_init_inputs():
    return []
