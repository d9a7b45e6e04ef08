"""An LSTM returning (output, h, c)."""
import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(8, 8, batch_first=True)
    def forward(self, x):
        out, (h, c) = self.lstm(x)
        return out, h, c
def get_inputs(): return [torch.randn(2, 5, 8)]
def get_init_inputs(): return []
