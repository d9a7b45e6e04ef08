"""A forward that advances a global of its module: state no captured graph carries (the seed names it)."""
import torch, torch.nn as nn
STEP = 0
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
    def forward(self, x):
        global STEP
        STEP += 1
        return self.fc(x) * STEP
def get_inputs(): return [torch.randn(4, 8)]
def get_init_inputs(): return []
