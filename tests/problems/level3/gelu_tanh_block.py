"""minGPT's GELU, written with torch.tanh and math in a submodule, after a linear layer."""
import math

import torch
import torch.nn as nn


class NewGELU(nn.Module):
    def __init__(self):
        super(NewGELU, self).__init__()

    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class Model(nn.Module):
    def __init__(self, n_embd):
        super(Model, self).__init__()
        self.fc = nn.Linear(n_embd, 4 * n_embd)
        self.act = NewGELU()

    def forward(self, x):
        return self.act(self.fc(x))


def get_inputs():
    return [torch.randn(2, 5, 8)]


def get_init_inputs():
    return [8]
