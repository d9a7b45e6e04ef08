"""Feature distillation: forward hooks store each network's hidden features on Model
(`setattr(self, "fs", o)`), read in the same forward. Each call stores before it reads, so
nothing carries between calls; the seed was refused as state that did ('held no tensor before
the call (None), and reads it'), as the check ran a copy whose hooks still wrote the original."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.student = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 5))
        self.teacher = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 5))
        self.fs = None
        self.ft = None
        self.student[1].register_forward_hook(lambda m, i, o: setattr(self, "fs", o))
        self.teacher[1].register_forward_hook(lambda m, i, o: setattr(self, "ft", o))

    def forward(self, x):
        s = self.student(x)
        with torch.no_grad():
            self.teacher(x)
        return s, F.mse_loss(self.fs, self.ft)


def get_inputs():
    return [torch.randn(6, 10)]


def get_init_inputs():
    return []
