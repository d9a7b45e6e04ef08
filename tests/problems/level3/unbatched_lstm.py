"""Level-3 style: recurrent layers on an unbatched (L, F) sequence, as nn.LSTM / nn.GRU
take one: an LSTM given (h0, c0) of (layers, H), then a GRU."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features: int, hidden: int):
        super().__init__()
        self.lstm = nn.LSTM(features, hidden, num_layers=2)
        self.gru = nn.GRU(hidden, hidden, batch_first=True)

    def forward(self, x, h0, c0):
        out, (h, c) = self.lstm(x, (h0, c0))
        y, g = self.gru(out)
        return y, h, c, g


def get_inputs():
    return [torch.randn(6, 4), torch.randn(2, 8), torch.randn(2, 8)]


def get_init_inputs():
    return [4, 8]
