"""nn.TransformerEncoderLayer, batch first."""
import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(d, h, dim_feedforward=64, dropout=0.0, batch_first=True)
    def forward(self, x):
        return self.layer(x)
def get_inputs(): return [torch.randn(2, 8, 32)]
def get_init_inputs(): return [32, 4]
