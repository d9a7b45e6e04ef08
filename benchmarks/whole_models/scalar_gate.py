"""A residual block with 0-dim parameters (a ReZero gate, a learnt temperature, as CLIP's
logit_scale): Inductor's cpu wrapper hands each to its kernel with `.item()`."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.gate = nn.Parameter(torch.tensor(0.25))
        self.log_temp = nn.Parameter(torch.tensor(0.5))

    def forward(self, x):
        h = x + self.gate * torch.tanh(self.fc(x))
        return torch.softmax(h * self.log_temp.exp(), dim=-1)


def get_inputs():
    return [torch.randn(4, 16)]


def get_init_inputs():
    return []
