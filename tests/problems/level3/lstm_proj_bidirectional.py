"""A bidirectional, batch-first LSTM with proj_size, returning its head and (h_n, c_n):
torch 2.11's cuda compile gave h_n another shape than eager's (named, not seeded wrong)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, input_size=6, hidden_size=12, num_layers=3, output_size=4):
        super().__init__()
        self.lstm = nn.LSTM(input_size, hidden_size, num_layers, batch_first=True, bidirectional=True, proj_size=5)
        self.fc = nn.Linear(10, output_size)

    def forward(self, x):
        out, (hn, cn) = self.lstm(x)
        return self.fc(out[:, -1, :]), hn, cn


def get_inputs():
    return [torch.rand(2, 7, 6)]


def get_init_inputs():
    return [6, 12, 3, 4]
