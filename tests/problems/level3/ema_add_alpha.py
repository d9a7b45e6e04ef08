"""A product added with alpha, twice: `torch.add(b, x @ w, alpha=0.1)` in the output and a
codebook average kept by an EMA, `avg.mul_(decay).add_(onehot.t() @ x, alpha=1 - decay)`.
Inductor's addmm fusion dropped the alpha (torch 2.11, 2.13): the seed's output was off by
the whole product, and its average drifted from call 2 on."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim: int, codes: int):
        super().__init__()
        self.w = nn.Parameter(torch.randn(dim, codes))
        self.b = nn.Parameter(torch.randn(codes))
        self.decay = 0.9
        self.register_buffer("avg", torch.randn(codes, dim))

    def forward(self, x):
        scores = torch.add(self.b, x @ self.w, alpha=0.1)
        onehot = torch.nn.functional.one_hot(scores.argmax(1), scores.shape[1]).to(x.dtype)
        self.avg.mul_(self.decay).add_(onehot.t() @ x, alpha=1 - self.decay)
        return scores, onehot @ self.avg


def get_inputs():
    return [torch.randn(16, 8)]


def get_init_inputs():
    return [8, 4]
