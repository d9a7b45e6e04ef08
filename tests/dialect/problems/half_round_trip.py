import torch
import torch.nn as nn


class Model(nn.Module):
    """A cast the forward makes on purpose: the Linear's output rounded to fp16 and back."""

    def __init__(self):
        super().__init__()
        self.l = nn.Linear(8, 8)

    def forward(self, x):
        return self.l(x).half().float() * 2


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return []
