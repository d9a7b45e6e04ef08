"""A two-layer LSTM over a sequence, the last step's output through a linear layer, its
initial state held as plain tensor attributes that the forward moves to the input's device
(KernelBench level 3's LSTM shape, small; c0 is stored as h0's tensor, as there)."""
import torch
import torch.nn as nn

batch_size = 3
num_layers = 2
hidden_size = 6


class Model(nn.Module):
    def __init__(self, input_size, hidden_size, num_layers, output_size):
        super(Model, self).__init__()
        self.h0 = torch.randn((num_layers, batch_size, hidden_size))
        self.c0 = torch.randn((num_layers, batch_size, hidden_size))
        self.lstm = nn.LSTM(input_size, hidden_size, num_layers, batch_first=True)
        self.fc = nn.Linear(hidden_size, output_size)

    def forward(self, x):
        self.h0 = self.h0.to(x.device)
        self.c0 = self.h0.to(x.device)
        out, _ = self.lstm(x, (self.h0, self.c0))
        return self.fc(out[:, -1, :])


def get_inputs():
    return [torch.randn(batch_size, 5, 4)]


def get_init_inputs():
    return [4, hidden_size, num_layers, 3]
