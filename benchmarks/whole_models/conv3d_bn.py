"""Conv3d, BatchNorm3d (training mode), Hardswish, AdaptiveMaxPool3d."""
import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv3d(2, 4, 3, padding=1), nn.BatchNorm3d(4), nn.Hardswish(), nn.AdaptiveMaxPool3d(2))
    def forward(self, x):
        return self.net(x).flatten(1)
def get_inputs(): return [torch.randn(2, 2, 6, 6, 6)]
def get_init_inputs(): return []
