"""Conv1d + ReLU, then a bidirectional GRU, averaged over time."""
import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(8, 16, 3, padding=1)
        self.gru = nn.GRU(16, 16, batch_first=True, bidirectional=True)
    def forward(self, x):
        y = torch.relu(self.conv(x)).transpose(1, 2)
        out, h = self.gru(y)
        return out.mean(1)
def get_inputs(): return [torch.randn(2, 8, 20)]
def get_init_inputs(): return []
