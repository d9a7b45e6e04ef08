"""A schedule kept in a mutable default argument of a top-level function, advanced each call: the
seed held 0.5 on every call (errors 0, 0.35, 0.58) before the capture looked into defaults."""
import torch
import torch.nn as nn


def schedule(state={"t": 0}):
    state["t"] += 1
    return 0.5 ** state["t"]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)

    def forward(self, x):
        return self.fc(x) * schedule()


def get_inputs():
    return [torch.randn(3, 6)]


def get_init_inputs():
    return []
