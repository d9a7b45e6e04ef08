"""Hooks on submodules written as closures in __init__: a local `def` pre-hook and a lambda forward
hook whose handle is kept, each using a torch op. The seed's forward is the captured graph, which
ran them; before, their bodies stayed in ModelNew.__init__ and the guards refused the seed
('inp[0].norm in pre is a PyTorch library op doing the work')."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.h = nn.Linear(dim, dim)
        self.out = nn.Linear(dim, dim)

        def unit(module, inputs):
            return (inputs[0] / inputs[0].norm(dim=-1, keepdim=True),)
        self.h.register_forward_pre_hook(unit)
        self._handle = self.out.register_forward_hook(lambda module, inputs, output: output / output.norm())

    def forward(self, x):
        return self.out(torch.relu(self.h(x)))


def get_inputs():
    return [torch.randn(4, 16)]


def get_init_inputs():
    return [16]
