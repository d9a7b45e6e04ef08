"""Two training-mode BatchNorms after two convolutions: each adds one to its num_batches_tracked at every
forward, which the seed does in one launch for both (tools/dialect/counters.py)."""
import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.f = nn.Sequential(nn.Conv2d(3, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU(),
                               nn.Conv2d(c, c, 1, bias=False), nn.BatchNorm2d(c))
    def forward(self, x):
        return self.f(x)
def get_inputs(): return [torch.randn(2, 3, 6, 6)]
def get_init_inputs(): return [8]
