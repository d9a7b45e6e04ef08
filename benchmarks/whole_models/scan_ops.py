"""cumsum, cumprod and logcumsumexp of a sigmoid."""
import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
    def forward(self, x):
        y = torch.sigmoid(self.fc(x))
        return torch.cumsum(y, 1) * torch.cumprod(y, 1) + torch.logcumsumexp(y, 1)
def get_inputs(): return [torch.randn(4, 8)]
def get_init_inputs(): return []
