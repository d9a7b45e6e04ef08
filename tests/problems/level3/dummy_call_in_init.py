import torch
import torch.nn as nn
import torch.nn.functional as F

class Features(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, 4, 3)

    def forward(self, x):
        return F.max_pool2d(F.relu(self.conv(x)), 2)

class Model(nn.Module):
    """A classifier that sizes its head by running its features on a dummy input in __init__."""

    def __init__(self, c=3, classes=5):
        super().__init__()
        self.features = Features(c)
        with torch.no_grad():
            flat = self.features(torch.zeros(1, c, 10, 10)).numel()
        self.fc = nn.Linear(flat, classes)

    def forward(self, x):
        return self.fc(self.features(x).flatten(1))

def get_inputs():
    return [torch.randn(2, 3, 10, 10)]

def get_init_inputs():
    return [3, 5]
