"""A diffusion ResBlock: GroupNorm, SiLU, 3x3 convolutions and a time embedding broadcast-added."""
import torch, torch.nn as nn, torch.nn.functional as F
class Model(nn.Module):
    def __init__(self, c=32, t=16):
        super().__init__()
        self.n1 = nn.GroupNorm(8, c); self.c1 = nn.Conv2d(c, c, 3, padding=1)
        self.t = nn.Linear(t, c); self.n2 = nn.GroupNorm(8, c); self.c2 = nn.Conv2d(c, c, 3, padding=1)
    def forward(self, x, temb):
        h = self.c1(F.silu(self.n1(x)))
        h = h + self.t(F.silu(temb))[:, :, None, None]
        h = self.c2(F.silu(self.n2(h)))
        return x + h
def get_inputs(): return [torch.randn(2, 32, 8, 8), torch.randn(2, 16)]
def get_init_inputs(): return []
