"""An LSTM returning its output and a function of its final states: a tuple of tensors."""
"""An LSTM whose forward returns a tuple of tensors (the sequence's output and the last hidden and cell states)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.lstm = nn.LSTM(d, d, batch_first=True)

    def forward(self, x):
        out, (h, c) = self.lstm(x)
        return out, h, torch.tanh(c)


def get_inputs():
    return [torch.randn(2, 5, 8)]


def get_init_inputs():
    return [8]
