import torch
import torch.nn as nn

class Model(nn.Module):
    """A forward that only reshapes its input: no work for a kernel."""

    def forward(self, x):
        return x.view(4, 3, 5)

def get_inputs():
    return [torch.randn(12, 5)]

def get_init_inputs():
    return []
