"""BatchNorm2d as a module builds it: in training mode until someone calls eval(); the
judge runs Model and ModelNew so by default ([eval] module_mode = "train": the batch's
statistics, as KernelBench runs them), so the seed must compile that forward too."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, c: int):
        super().__init__()
        self.bn = nn.BatchNorm2d(c)

    def forward(self, x):
        return self.bn(x)


def get_inputs():
    return [torch.rand(4, 8, 16, 16)]


def get_init_inputs():
    return [8]
