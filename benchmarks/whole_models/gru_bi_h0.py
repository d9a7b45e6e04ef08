"""A bidirectional GRU given its initial hidden state as an input; returns output and h_n."""
import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__(); self.g = nn.GRU(6, 10, batch_first=True, bidirectional=True)
    def forward(self, x, h0):
        out, h = self.g(x, h0)
        return out, h
def get_inputs(): return [torch.randn(3, 7, 6), torch.randn(2, 3, 10)]
def get_init_inputs(): return []
