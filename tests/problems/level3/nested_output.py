"""Level-3 style: a forward returning a nested tuple, ((features, logits), scores)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.fc = nn.Linear(dim, dim)

    def forward(self, x):
        h = self.fc(x)
        return (h, h.sum(-1)), torch.sigmoid(h)


def get_inputs():
    return [torch.randn(3, 8)]


def get_init_inputs():
    return [8]
