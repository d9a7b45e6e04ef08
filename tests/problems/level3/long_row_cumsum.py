"""A running sum along rows of 8192 (a cumulative signal, a Mamba-style segment sum): torch's cpu
cumsum of float32 adds in float64, so a float32 scan misses the fp32 tolerance where a sum passes
near zero."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.cumsum(x, -1)


def get_inputs():
    return [torch.randn(4, 8192)]


def get_init_inputs():
    return []
