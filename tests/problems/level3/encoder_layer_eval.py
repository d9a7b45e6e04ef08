import torch
import torch.nn as nn

class Model(nn.Module):
    """A transformer encoder layer judged in eval mode, where PyTorch runs it as one fused
    inference op (its "fast path") unless told otherwise."""

    def __init__(self, d=16, heads=2):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(d, heads, dim_feedforward=32, dropout=0.1, batch_first=True)

    def forward(self, x):
        return self.layer(x)

def get_inputs():
    return [torch.randn(2, 5, 16)]

def get_init_inputs():
    return []
