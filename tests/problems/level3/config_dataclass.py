from dataclasses import dataclass
import torch
import torch.nn as nn

@dataclass
class Config:
    d: int = 8
    hidden: int = 16
    eps: float = 1e-5

class Model(nn.Module):
    """A model built from a dataclass config object passed as its one init input."""
    def __init__(self, cfg):
        super().__init__()
        self.norm = nn.LayerNorm(cfg.d, eps=cfg.eps)
        self.ff = nn.Sequential(nn.Linear(cfg.d, cfg.hidden), nn.GELU(), nn.Linear(cfg.hidden, cfg.d))

    def forward(self, x):
        return x + self.ff(self.norm(x))

def get_inputs():
    return [torch.randn(3, 5, 8)]

def get_init_inputs():
    return [Config()]
