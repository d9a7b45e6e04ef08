"""nn.Linear(96, 64) + ReLU on a 32 x 96 batch: the matmul goes to extern_kernels.mm, the bias + ReLU to a Triton epilogue."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.relu(self.linear(x))


def get_inputs():
    return [torch.randn(32, 96)]


def get_init_inputs():
    return [96, 64]
