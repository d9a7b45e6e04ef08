"""float32 work by design, a float64 output: a uint8 image made float (`img.float() / 255`) through
a convolution, its pooled features cast to double and weighted by a float64 input."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.fc = nn.Linear(4, 4)

    def forward(self, img, w):
        f = self.conv(img.float() / 255.0).mean((2, 3))
        return self.fc(f.float()).double() * w


def get_inputs():
    return [torch.randint(0, 256, (2, 3, 6, 6), dtype=torch.uint8), torch.randn(4, dtype=torch.float64)]


def get_init_inputs():
    return []
