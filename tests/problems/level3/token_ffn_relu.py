"""A transformer's feed-forward on (batch, tokens, features) with a residual: each Linear is a
2-D product between two reshapes, and the first one's ReLU goes into its product's epilogue
(the reshape after it)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.fc1 = nn.Linear(d_model, d_ff)
        self.fc2 = nn.Linear(d_ff, d_model)

    def forward(self, x):
        return x + self.fc2(torch.relu(self.fc1(x)))


def get_inputs():
    return [torch.randn(3, 5, 12)]


def get_init_inputs():
    return [12, 20]
