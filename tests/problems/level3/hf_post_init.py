"""HuggingFace's pattern: a base class's post_init() applies self._init_weights, which Model
overrides; the seed's ModelNew derives the base and must initialise with Model's override."""
import torch
import torch.nn as nn


class TinyPreTrainedModel(nn.Module):
    def post_init(self):
        self.apply(self._init_weights)

    def _init_weights(self, module):
        pass


class Model(TinyPreTrainedModel):
    def __init__(self, d=16):
        super().__init__()
        self.fc1 = nn.Linear(d, 2 * d)
        self.fc2 = nn.Linear(2 * d, d)
        self.post_init()

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, std=0.5)
            nn.init.constant_(module.bias, 0.1)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def get_inputs():
    return [torch.randn(4, 16)]


def get_init_inputs():
    return [16]
