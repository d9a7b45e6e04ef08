"""minGPT's set-up: Model's __init__ asks another class for its defaults (`Block.get_default_config()`, a
staticmethod) and builds that class from them; the seed carries the staticmethod with the class."""
import types

import torch
import torch.nn as nn


class Block(nn.Module):
    @staticmethod
    def get_default_config():
        return types.SimpleNamespace(n_embd=8, hidden=16)

    def __init__(self, config):
        super().__init__()
        self.fc = nn.Linear(config.n_embd, config.hidden)
        self.proj = nn.Linear(config.hidden, config.n_embd)

    def forward(self, x):
        return x + self.proj(torch.relu(self.fc(x)))


class Model(nn.Module):
    def __init__(self, layers=2):
        super().__init__()
        config = Block.get_default_config()
        self.blocks = nn.Sequential(*[Block(config) for _ in range(layers)])

    def forward(self, x):
        return self.blocks(x)


def get_inputs():
    return [torch.randn(3, 5, 8)]


def get_init_inputs():
    return [2]
