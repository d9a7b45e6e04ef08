import torch
import torch.nn as nn

class Model(nn.Module):
    """A forward returning a list (not a tuple) of two tensors of different dtypes, float and bool."""
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        y = self.lin(x)
        return [y.relu(), y > 0]

def get_inputs():
    return [torch.randn(3, 4)]

def get_init_inputs():
    return []
