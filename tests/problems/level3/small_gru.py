"""A two-layer bidirectional GRU, sequence first, returning its last hidden state h_n (KernelBench
level 3's GRUBidirectionalHidden shape, small); h0 a plain tensor attribute."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, input_size, hidden_size, num_layers):
        super().__init__()
        self.gru = nn.GRU(input_size, hidden_size, num_layers, batch_first=False, bidirectional=True)
        self.h0 = torch.randn((num_layers * 2, 3, hidden_size))

    def forward(self, x):
        self.h0 = self.h0.to(x.device)
        output, h_n = self.gru(x, self.h0)
        return h_n


def get_inputs():
    return [torch.randn(5, 3, 4)]


def get_init_inputs():
    return [4, 6, 2]
