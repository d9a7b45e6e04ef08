import torch
import torch.nn as nn

class Model(nn.Module):
    """An fp32 input scaled by a 0-dim float64 tensor input: Dynamo traces it twice (its first
    try restarts to treat the scalar as a number)."""

    def forward(self, x, s):
        return x * s + torch.sin(x)

def get_inputs():
    return [torch.randn(4, 6), torch.tensor(1.2345678901234, dtype=torch.float64)]

def get_init_inputs():
    return []
