"""An LSTM (sequence first) that calls self.lstm.flatten_parameters() inside forward, as
DataParallel-era code does, fed a batch-first input transposed in forward (non-contiguous)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(6, 10, num_layers=2)
        self.fc = nn.Linear(10, 3)

    def forward(self, x):
        self.lstm.flatten_parameters()
        out, (h, c) = self.lstm(x.transpose(0, 1))
        return self.fc(out[-1]) + self.fc(h[-1])


def get_inputs():
    return [torch.randn(3, 5, 6)]


def get_init_inputs():
    return []
