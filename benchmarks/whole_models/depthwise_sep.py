"""A dilated depthwise conv, a pointwise conv, Mish, AvgPool2d with ceil_mode."""
import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.dw = nn.Conv2d(8, 8, 3, padding=2, dilation=2, groups=8)
        self.pw = nn.Conv2d(8, 16, 1)
        self.pool = nn.AvgPool2d(3, stride=2, ceil_mode=True)
        self.act = nn.Mish()
    def forward(self, x):
        return self.pool(self.act(self.pw(self.dw(x))))
def get_inputs(): return [torch.randn(2, 8, 11, 11)]
def get_init_inputs(): return []
