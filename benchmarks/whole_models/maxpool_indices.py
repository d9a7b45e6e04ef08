"""Conv1d, MaxPool1d returning indices, MaxUnpool1d."""
import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.MaxPool1d(2, return_indices=True); self.unpool = nn.MaxUnpool1d(2)
        self.conv = nn.Conv1d(3, 3, 3, padding=1)
    def forward(self, x):
        y, i = self.pool(self.conv(x))
        return self.unpool(y, i)
def get_inputs(): return [torch.randn(2, 3, 10)]
def get_init_inputs(): return []
