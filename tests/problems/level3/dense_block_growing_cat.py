"""A DenseNet block of six layers: each concatenates every feature so far (KernelBench level 3's
14_DenseNet121DenseBlock, smaller), so layer k's cat repeats layer k - 1's inputs and adds one."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, num_layers: int, num_input_features: int, growth_rate: int):
        super().__init__()
        self.layers = nn.ModuleList([
            nn.Sequential(nn.BatchNorm2d(num_input_features + i * growth_rate), nn.ReLU(inplace=True),
                          nn.Conv2d(num_input_features + i * growth_rate, growth_rate, 3, padding=1, bias=False))
            for i in range(num_layers)])

    def forward(self, x):
        features = [x]
        for layer in self.layers:
            features.append(layer(x))
            x = torch.cat(features, 1)
        return x


def get_inputs():
    return [torch.rand(2, 8, 6, 6)]


def get_init_inputs():
    return [6, 8, 4]
