"""nn.RNN with a ReLU, without biases, batch first, its output sequence returned."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.rnn = nn.RNN(input_size, hidden_size, 1, nonlinearity="relu", bias=False, batch_first=True)

    def forward(self, x):
        out, _ = self.rnn(x)
        return out


def get_inputs():
    return [torch.randn(2, 7, 5)]


def get_init_inputs():
    return [5, 8]
