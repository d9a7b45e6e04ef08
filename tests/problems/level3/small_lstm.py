"""A two-layer LSTM over a sequence, the last step's output through a linear layer
(KernelBench level 3's LSTM shape, small)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, input_size, hidden_size, num_layers, output_size):
        super(Model, self).__init__()
        self.lstm = nn.LSTM(input_size, hidden_size, num_layers, batch_first=True)
        self.fc = nn.Linear(hidden_size, output_size)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.fc(out[:, -1, :])


def get_inputs():
    return [torch.randn(3, 5, 4)]


def get_init_inputs():
    return [4, 6, 2, 3]
