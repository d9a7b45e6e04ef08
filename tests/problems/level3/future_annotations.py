"""A module file under `from __future__ import annotations` whose annotations name what only
`if TYPE_CHECKING:` imports: Python never evaluates them, and neither may the seed."""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import torch
import torch.nn as nn

if TYPE_CHECKING:
    from collections.abc import Sequence


class Config:
    dims: Sequence[int] = (16, 32, 16)

    def __init__(self, dims: Sequence[int]) -> None:
        self.dims = tuple(dims)


class Model(nn.Module):
    def __init__(self, dims: Sequence[int] = (16, 32, 16), act: Optional[nn.Module] = None) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        for a, b in zip(Config(dims).dims[:-1], Config(dims).dims[1:]):
            layers += [nn.Linear(a, b), act or nn.ReLU()]
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def get_inputs():
    return [torch.randn(4, 16)]


def get_init_inputs():
    return [(16, 32, 16)]
