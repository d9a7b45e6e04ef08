"""Blocks reading a class attribute (not an instance one) in a ModuleList, then LayerNorm."""
import torch, torch.nn as nn
class Block(nn.Module):
    scale = 0.5
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, d)
    def forward(self, x):
        return x + self.scale * torch.tanh(self.fc(x))
class Model(nn.Module):
    def __init__(self, d, n):
        super().__init__()
        self.blocks = nn.ModuleList([Block(d) for _ in range(n)])
        self.norm = nn.LayerNorm(d)
    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.norm(x)
def get_inputs(): return [torch.randn(4, 16)]
def get_init_inputs(): return [16, 3]
