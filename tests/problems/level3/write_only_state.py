"""Python state the forward writes and nothing reads: a shape kept for inspection, a call
count, a log list, a dict entry, a global log. No output depends on it, so the seed follows
Model without it."""
import torch
import torch.nn as nn

LOG = []


class Model(nn.Module):
    def __init__(self, d=8):
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.last_shape = None
        self.calls = 0
        self.history = []
        self.stats = {}

    def forward(self, x):
        self.last_shape = tuple(x.shape)
        self.calls += 1
        y = self.fc(x)
        self.history.append(y.detach())
        self.stats["rows"] = x.size(0)
        LOG.append(x.size(0))
        return y


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return [8]
