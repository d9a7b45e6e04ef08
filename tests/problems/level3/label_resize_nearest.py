"""Nearest grid sampling at ties: an identity affine grid resizing a map to 2H-1 x 2W-1 puts
every other point halfway between two pixels. torch's decomposition rounded those to the
other pixel than eager (whole columns off); the seed now picks eager's."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("theta", torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])[None])

    def forward(self, x):
        n, c, h, w = x.shape
        grid = F.affine_grid(self.theta.expand(n, 2, 3), [n, c, 2 * h - 1, 2 * w - 1], align_corners=True)
        wide = F.affine_grid(self.theta.expand(n, 2, 3), [n, c, 2 * h, 2 * w], align_corners=False)
        return (F.grid_sample(x, grid, mode="nearest", align_corners=True),
                F.grid_sample(x, wide * 1.3, mode="nearest", padding_mode="border", align_corners=False))


def get_inputs():
    return [torch.randn(2, 3, 5, 7)]


def get_init_inputs():
    return []
