"""A forward advancing a Python int attribute: state no graph carries (named, no seed)."""
import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.calls = 0
    def forward(self, x):
        self.calls += 1
        return self.fc(x) * self.calls
def get_inputs(): return [torch.randn(4, 8)]
def get_init_inputs(): return []
