"""nn.Embedding with max_norm: the forward renormalises, in place, the table rows it looks up
(aten.embedding_renorm_, which Inductor leaves to PyTorch), then averages them."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 6, max_norm=1.0)
        self.out = nn.Linear(6, 3)

    def forward(self, idx):
        return self.out(self.emb(idx).mean(1))


def get_inputs():
    return [torch.randint(0, 20, (4, 7))]


def get_init_inputs():
    return []
