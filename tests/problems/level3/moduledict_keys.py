"""Level-3 style: towers in a ModuleDict keyed by names that are no attribute syntax
("ctr-head", "1") or read as a host transfer ("item"), and weights in a ParameterList."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, users: int, items: int, dim: int):
        super().__init__()
        self.emb = nn.ModuleDict({"user": nn.Embedding(users, dim), "item": nn.Embedding(items, dim)})
        self.towers = nn.ModuleDict({"ctr-head": nn.Linear(dim, 1), "1": nn.Linear(dim, 1)})
        self.mix = nn.ParameterList([nn.Parameter(torch.randn(dim)) for _ in range(2)])

    def forward(self, u, i):
        h = self.emb["user"](u) * self.mix[0] + self.emb["item"](i) * self.mix[1]
        return self.towers["ctr-head"](h) + self.towers["1"](torch.relu(h))


def get_inputs():
    return [torch.randint(0, 10, (6,)), torch.randint(0, 12, (6,))]


def get_init_inputs():
    return [10, 12, 8]
