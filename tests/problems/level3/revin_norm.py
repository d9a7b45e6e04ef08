"""RevIN as its paper's code (and PatchTST's, iTransformer's) writes it: the "norm" call stores
the series' mean and deviation on self, the "denorm" call of the same forward reads them. Each
forward stores them before reading them, so nothing carries between calls; the seed was refused
as if it did ("held no tensor before the call (None), and reads it")."""
import torch
import torch.nn as nn


class RevIN(nn.Module):
    def __init__(self, channels: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(channels) * 1.5)
        self.bias = nn.Parameter(torch.zeros(channels) + 0.1)

    def forward(self, x, mode: str):
        if mode == "norm":
            self.mean = x.mean(dim=1, keepdim=True).detach()
            self.stdev = torch.sqrt(torch.var(x, dim=1, keepdim=True, unbiased=False) + self.eps).detach()
            return (x - self.mean) / self.stdev * self.weight + self.bias
        x = (x - self.bias) / (self.weight + self.eps * self.eps)
        return x * self.stdev + self.mean


class Model(nn.Module):
    def __init__(self, length: int, horizon: int, channels: int):
        super().__init__()
        self.revin = RevIN(channels)
        self.head = nn.Linear(length, horizon)

    def forward(self, x):
        x = self.revin(x, "norm")
        y = self.head(x.permute(0, 2, 1)).permute(0, 2, 1)
        return self.revin(y, "denorm")


def get_inputs():
    return [torch.randn(4, 32, 3) * 3 + 5]


def get_init_inputs():
    return [32, 8, 3]
