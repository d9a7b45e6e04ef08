"""Nucleus (top-p) filtering of a head's logits: a sort, a cumulative softmax and a bool
scatter back to vocabulary order (Inductor's cuda backend leaves a bool scatter to PyTorch)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, d=32, vocab=40, p=0.8, temperature=0.7):
        super().__init__()
        self.head = nn.Linear(d, vocab)
        self.p, self.t = p, temperature

    def forward(self, h):
        logits = self.head(h[:, -1, :]) / self.t
        sorted_logits, order = torch.sort(logits, descending=True)
        remove = torch.cumsum(F.softmax(sorted_logits, dim=-1), dim=-1) > self.p
        remove[..., 1:] = remove[..., :-1].clone()
        remove[..., 0] = False
        mask = remove.scatter(1, order, remove)
        return F.softmax(logits.masked_fill(mask, float("-inf")), dim=-1)


def get_inputs():
    return [torch.randn(3, 6, 32)]


def get_init_inputs():
    return [32, 40, 0.8, 0.7]
