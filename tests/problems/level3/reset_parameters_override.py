"""A layer deriving nn.Linear that overrides only reset_parameters (which nn.Linear's own
constructor calls): the seed must set its weights up the same way."""
import torch
import torch.nn as nn


class IdentityInitLinear(nn.Linear):
    def reset_parameters(self):
        nn.init.eye_(self.weight)
        with torch.no_grad():
            self.weight.mul_(0.5)
        nn.init.zeros_(self.bias)


class Model(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.fc = IdentityInitLinear(d, d)
        self.out = nn.Linear(d, 4)

    def forward(self, x):
        return self.out(torch.relu(self.fc(x)))


def get_inputs():
    return [torch.randn(4, 16)]


def get_init_inputs():
    return [16]
