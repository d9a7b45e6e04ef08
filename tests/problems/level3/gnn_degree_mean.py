"""Message passing as graph-network code writes it: each node's degree counted by scattering
ones into int64, a mean aggregation with and without the node's own value, and an amin.
Before, the seed was made and raised when it first ran ("floating-point out only", "reduce='mean'
has no atomic form")."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.lin = nn.Linear(dim, dim)

    def forward(self, x, edge_index):
        src, dst = edge_index
        h = self.lin(x)
        deg = torch.zeros(x.shape[0], dtype=torch.long, device=x.device).scatter_add_(0, dst, torch.ones_like(dst))
        idx = dst[:, None].expand(-1, h.shape[1])
        mean = torch.zeros_like(h).scatter_reduce(0, idx, h[src], reduce="mean", include_self=False)
        with_self = h.scatter_reduce(0, idx, h[src], reduce="mean", include_self=True)
        low = torch.zeros_like(h).scatter_reduce(0, idx, h[src], reduce="amin", include_self=False)
        return mean + with_self + low, deg


def get_inputs():
    return [torch.randn(20, 8), torch.randint(0, 20, (2, 64))]


def get_init_inputs():
    return [8]
