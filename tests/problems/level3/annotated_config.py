from dataclasses import dataclass

import torch
import torch.nn as nn

@dataclass
class Config:
    dim: int = 8
    hidden: int = 16
    scale: float = 0.5

class Model(nn.Module):
    """Type annotations on the layers, and a @dataclass config built in __init__."""

    def __init__(self, dim: int = 8, hidden: int = 16) -> None:
        super().__init__()
        self.cfg: Config = Config(dim, hidden)
        self.up: nn.Linear = nn.Linear(dim, hidden)
        self.down: nn.Linear = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.relu(self.up(x))) * self.cfg.scale

def get_inputs():
    return [torch.randn(4, 8)]

def get_init_inputs():
    return [8, 16]
