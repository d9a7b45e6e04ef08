"""A 2-layer LSTM with dropout between layers in training mode: a random reference (named)."""
import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(8, 8, num_layers=2, dropout=0.3, batch_first=True)
    def forward(self, x):
        return self.lstm(x)[0][:, -1]
def get_inputs(): return [torch.randn(2, 5, 8)]
def get_init_inputs(): return []
