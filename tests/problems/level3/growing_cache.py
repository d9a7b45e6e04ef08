"""A key cache buffer the forward grows by torch.cat each call: a seed's sizes are fixed (named)."""
import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.k = nn.Linear(d, d)
        self.register_buffer("keys", torch.zeros(1, 2, d))
    def forward(self, x):
        self.keys = torch.cat([self.keys, self.k(x)], 1)
        return torch.softmax(x @ self.keys.transpose(1, 2), -1) @ self.keys
def get_inputs(): return [torch.randn(1, 4, 16)]
def get_init_inputs(): return [16]
