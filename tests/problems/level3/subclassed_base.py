import torch
import torch.nn as nn

class Base(nn.Module):
    """A base network: its __init__ sets a scale, a helper builds layers, the forward and its own helper compute."""
    width = 8

    def __init__(self, scale=0.5):
        super().__init__()
        self.scale = scale

    def make(self, i, o):
        return nn.Sequential(nn.Linear(i, o), nn.GELU())

    def mix(self, x):
        return torch.tanh(x) * self.scale

    def forward(self, x):
        return self.head(self.mix(self.body(x)))

class Model(Base):
    def __init__(self, d=6, classes=3):
        super().__init__(scale=0.25)
        self.body = self.make(d, self.width)
        self.head = nn.Linear(self.width, classes)

def get_inputs():
    return [torch.randn(4, 6)]

def get_init_inputs():
    return []
