"""Keys and values cached in a tuple on the first call, reused after: the first call's graph
computes them every call, so no seed can follow the cache (named)."""
import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.kv = nn.Linear(d, 2 * d)
        self.cache = None
    def forward(self, x, memory):
        if self.cache is None:
            self.cache = self.kv(memory).chunk(2, -1)
        k, v = self.cache
        return torch.softmax(x @ k.transpose(1, 2), -1) @ v
def get_inputs(): return [torch.randn(2, 4, 16), torch.randn(2, 6, 16)]
def get_init_inputs(): return [16]
