"""Training-mode BatchNorms of four kinds, each one launch of krefine's batch-statistics kernel in the
seed (tools/dialect/batch_stats.py): a BatchNorm2d after a convolution (momentum 0.3), a BatchNorm1d
over (N, C, L) that keeps no running statistics, a BatchNorm1d over (N, C) after a Linear, and a
BatchNorm3d."""
import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(3, c, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(c, momentum=0.3)
        self.bn1 = nn.BatchNorm1d(c, track_running_stats=False)
        self.fc = nn.Linear(c, 16)
        self.bnf = nn.BatchNorm1d(16)
        self.bn3 = nn.BatchNorm3d(2)
    def forward(self, x, v):
        y = torch.relu(self.bn2(self.conv(x)))
        z = self.bn1(y.flatten(2))
        return self.bnf(self.fc(z.mean(2))), self.bn3(v)
def get_inputs(): return [torch.randn(4, 3, 6, 6), torch.randn(3, 2, 3, 4, 5)]
def get_init_inputs(): return [8]
