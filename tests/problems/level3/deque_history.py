"""Recent losses kept in a collections.deque on self: the seed averaged one entry every call
(errors 0, 0.035, 0.021) before the capture looked into deques."""
from collections import deque

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 1)
        self.hist = deque(maxlen=3)

    def forward(self, x):
        loss = self.fc(x).pow(2).mean()
        self.hist.append(loss.detach())
        return loss / torch.stack(list(self.hist)).mean()


def get_inputs():
    return [torch.randn(5, 6)]


def get_init_inputs():
    return []
