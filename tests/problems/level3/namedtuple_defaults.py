"""Level-3 style: EfficientNet-PyTorch's configuration, a namedtuple whose defaults a top-level
statement sets (`GlobalParams.__new__.__defaults__ = ...`), and a constant changed after it is bound."""
import collections
import torch
import torch.nn as nn

GlobalParams = collections.namedtuple("GlobalParams", ["width", "depth", "dropout"])
GlobalParams.__new__.__defaults__ = (None,) * len(GlobalParams._fields)
EXTRA_LAYERS = 1
EXTRA_LAYERS += 1


def make_params():
    return GlobalParams(width=16, depth=EXTRA_LAYERS)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        p = make_params()
        self.layers = nn.ModuleList([nn.Linear(p.width, p.width) for _ in range(p.depth)])

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


def get_inputs():
    return [torch.randn(4, 16)]


def get_init_inputs():
    return []
