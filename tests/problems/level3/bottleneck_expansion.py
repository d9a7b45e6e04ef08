"""A ResNet-style bottleneck whose class attribute `expansion` is read in __init__ and forward."""
import torch
import torch.nn as nn


class Model(nn.Module):
    expansion = 4

    def __init__(self, in_features, width):
        super(Model, self).__init__()
        self.fc1 = nn.Linear(in_features, width)
        self.fc2 = nn.Linear(width, width * self.expansion)
        self.width = width

    def forward(self, x):
        y = torch.relu(self.fc1(x))
        y = self.fc2(y)
        return y.view(y.shape[0], self.width, self.expansion).sum(-1)


batch_size = 4
in_features = 16
width = 8


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, width]
