"""nn.Linear then ReLU: on cpu Inductor leaves the GEMM to a library (extern_kernels.addmm)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super(Model, self).__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.relu(self.fc(x))


def get_inputs():
    return [torch.randn(6, 12)]


def get_init_inputs():
    return [12, 10]
