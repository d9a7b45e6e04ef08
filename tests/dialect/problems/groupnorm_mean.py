"""The mean of a GroupNorm's output (the epilogue of KernelBench level 2's 23_Conv3d_GroupNorm_Mean,
without its convolution): 0 in exact arithmetic (weight 1 and bias 0 as constructed), ~1e-8
rounding noise in float32, which another order of summation does not follow."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, channels, num_groups):
        super().__init__()
        self.group_norm = nn.GroupNorm(num_groups, channels)

    def forward(self, x):
        return self.group_norm(x * 3 + 1).mean(dim=[1, 2, 3])


def get_inputs():
    return [torch.rand(16, 16, 12, 12)]


def get_init_inputs():
    return [16, 4]
