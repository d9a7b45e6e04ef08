"""A UNet step: conv, GroupNorm, SiLU, max pool, transposed conv, skip concat."""
import torch, torch.nn as nn, torch.nn.functional as F
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.down = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.GroupNorm(2, 8), nn.SiLU())
        self.pool = nn.MaxPool2d(2)
        self.mid = nn.Conv2d(8, 8, 3, padding=1)
        self.up = nn.ConvTranspose2d(8, 8, 2, stride=2)
        self.out = nn.Conv2d(16, 3, 1)
    def forward(self, x):
        a = self.down(x)
        b = self.up(F.relu(self.mid(self.pool(a))))
        return self.out(torch.cat([a, b], 1))
def get_inputs(): return [torch.randn(2, 3, 16, 16)]
def get_init_inputs(): return []
