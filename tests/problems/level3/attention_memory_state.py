"""Attention over a memory of the last 4 steps (Transformer-XL style), kept as a plain tensor
attribute the forward replaces with a slice of a concatenation: a view whose strides differ
from the zeros it started as, so the seed's next call gets a layout call() was not compiled for."""
import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 16)
        self.mem = torch.zeros(2, 4, 16)

    def forward(self, x):
        mem = self.mem.to(x.device)
        ctx = torch.cat([mem, x], dim=1)
        att = torch.softmax(x @ ctx.transpose(1, 2) / 4.0, dim=-1) @ ctx
        self.mem = torch.cat([mem, x], dim=1)[:, -4:].detach()
        return self.lin(att)

def get_inputs():
    return [torch.randn(2, 3, 16)]

def get_init_inputs():
    return []
