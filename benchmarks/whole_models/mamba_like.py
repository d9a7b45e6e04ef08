"""Cumulative sums over time, an exponential decay and a projection (a scan)."""
import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.A = nn.Parameter(torch.randn(d) * 0.1)
        self.inp = nn.Linear(d, d)
    def forward(self, x):
        a = torch.cumsum(self.A.expand_as(x), dim=1)
        y = torch.exp(-a.abs()) * self.inp(x)
        return torch.cumsum(y, dim=1)[:, -1]
def get_inputs(): return [torch.randn(2, 10, 16)]
def get_init_inputs(): return [16]
