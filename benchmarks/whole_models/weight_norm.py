"""A weight-normalised layer (nn.utils.parametrizations.weight_norm) after a plain one: the parametrization swaps the Linear's class when it is built."""
import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.wn = nn.utils.parametrizations.weight_norm(nn.Linear(16, 8))
    def forward(self, x):
        return self.wn(torch.relu(self.fc(x)))
def get_inputs(): return [torch.randn(4, 16)]
def get_init_inputs(): return []
