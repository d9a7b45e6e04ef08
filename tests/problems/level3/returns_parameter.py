"""Level-3 style: a CLIP-like head that returns its logit scale parameter as it is,
beside what it computes."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.logit_scale = nn.Parameter(torch.tensor(2.6592))

    def forward(self, x):
        return self.fc(x), self.logit_scale.exp(), self.logit_scale


def get_inputs():
    return [torch.randn(4, 16)]


def get_init_inputs():
    return [16]
