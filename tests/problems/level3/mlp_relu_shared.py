"""Three Linears: the first's ReLU goes into its product's epilogue; the second's output is
returned as well as activated (its product stays a product, its ReLU a kernel of its own); the
third has no activation."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n_in, hidden, n_out):
        super().__init__()
        self.fc1 = nn.Linear(n_in, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, n_out)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        z = self.fc2(h)
        return self.fc3(torch.relu(z)), z


def get_inputs():
    return [torch.randn(9, 12)]


def get_init_inputs():
    return [12, 20, 5]
