"""Level-3 style: a two-layer GRU with dropout between its layers, in training mode."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(4, 8, num_layers=2, dropout=0.5, batch_first=True)

    def forward(self, x):
        return self.rnn(x)[0]


def get_inputs():
    return [torch.randn(2, 5, 4)]


def get_init_inputs():
    return []
