"""A linear layer, then a descending sort's values and indices (Inductor lowers this sort itself)."""
import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(12, 12)
    def forward(self, x):
        y = self.fc(x)
        vals, idx = torch.sort(y, dim=1, descending=True)
        return vals * 2 + idx.float()
def get_inputs(): return [torch.randn(5, 12)]
def get_init_inputs(): return []
