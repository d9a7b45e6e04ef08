"""nn.TransformerDecoderLayer over a memory of another length."""
import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerDecoderLayer(32, 4, dim_feedforward=64, dropout=0.0, batch_first=True)
    def forward(self, x, mem):
        return self.layer(x, mem)
def get_inputs(): return [torch.randn(2, 6, 32), torch.randn(2, 9, 32)]
def get_init_inputs(): return []
