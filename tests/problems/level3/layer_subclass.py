import torch
import torch.nn as nn

class Model(nn.Linear):
    """A model that is a torch layer: no __init__ of its own (nn.Linear's takes the init inputs),
    a forward that calls the layer's own and adds to it."""

    def forward(self, x):
        return torch.relu(super().forward(x)) * 2.0

def get_inputs():
    return [torch.randn(4, 6)]

def get_init_inputs():
    return [6, 5]
