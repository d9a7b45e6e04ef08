"""A convolution with padding_mode='circular' (the padding as wrap-around indexing)."""
import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__(); self.c = nn.Conv2d(3, 6, 3, padding=1, padding_mode="circular")
    def forward(self, x): return self.c(x)
def get_inputs(): return [torch.randn(2, 3, 9, 7)]
def get_init_inputs(): return []
