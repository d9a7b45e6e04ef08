"""A forward that advances a number kept inside a list: state no captured graph carries (the seed names it)."""
import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.steps = [0]
    def forward(self, x):
        self.steps[0] += 1
        return self.fc(x) * self.steps[0]
def get_inputs(): return [torch.randn(4, 8)]
def get_init_inputs(): return []
