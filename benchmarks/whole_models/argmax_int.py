"""A linear layer, then argmax: an integer output."""
import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 10)
    def forward(self, x):
        return torch.argmax(self.fc(x), dim=-1)
def get_inputs(): return [torch.randn(8, 16)]
def get_init_inputs(): return []
