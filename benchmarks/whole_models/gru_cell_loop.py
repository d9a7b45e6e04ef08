"""A GRUCell stepped in a Python loop over time, from a zero hidden state."""
import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self, i, h):
        super().__init__()
        self.cell = nn.GRUCell(i, h)
        self.h = h
    def forward(self, x):
        hx = torch.zeros(x.size(0), self.h, device=x.device)
        for t in range(x.size(1)):
            hx = self.cell(x[:, t], hx)
        return hx
def get_inputs(): return [torch.randn(3, 6, 8)]
def get_init_inputs(): return [8, 12]
