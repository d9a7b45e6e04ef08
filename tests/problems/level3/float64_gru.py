"""A float64 GRU: krefine's recurrent family computes in fp32, so no seed, and the reason says so."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(4, 8, batch_first=True).double()

    def forward(self, x):
        return self.rnn(x)[0]


def get_inputs():
    return [torch.randn(2, 5, 4, dtype=torch.float64)]


def get_init_inputs():
    return []
