import torch
import torch.nn as nn

class Model(nn.Module):
    """A forward hook on the model itself, which scales what the forward returns."""

    def __init__(self, d=8):
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.register_forward_hook(lambda m, i, o: o * 2.0)

    def forward(self, x):
        return torch.tanh(self.fc(x))

def get_inputs():
    return [torch.randn(4, 8)]

def get_init_inputs():
    return []
