"""A 3-D spatial transformer: a small localisation net predicts an affine map, and the
volume is resampled trilinearly on its grid (zeros outside), its label map by nearest voxel
(border), as a registration network does (aten.grid_sampler_3d, which Inductor leaves to
PyTorch)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, channels: int = 2):
        super().__init__()
        self.loc = nn.Sequential(nn.Conv3d(channels, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool3d(1),
                                 nn.Flatten(), nn.Linear(4, 12))
        nn.init.zeros_(self.loc[-1].weight)
        with torch.no_grad():
            self.loc[-1].bias.copy_(torch.tensor([1.1, 0.1, 0, 0.05, 0, 0.9, 0.1, 0, 0.1, 0, 1.2, -0.1]))

    def forward(self, volume, labels):
        theta = self.loc(volume).view(-1, 3, 4)
        grid = F.affine_grid(theta, list(volume.shape), align_corners=False)
        moved = F.grid_sample(volume, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
        moved_labels = F.grid_sample(labels, grid, mode="nearest", padding_mode="border", align_corners=False)
        return moved, moved_labels


def get_inputs():
    return [torch.randn(2, 2, 6, 7, 8), torch.randint(0, 4, (2, 1, 6, 7, 8)).float()]


def get_init_inputs():
    return [2]
