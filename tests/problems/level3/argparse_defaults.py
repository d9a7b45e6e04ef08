import argparse

import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("--hidden", type=int, default=12)
args = parser.parse_args()

class Model(nn.Module):
    """A script's model: its default width read from the command line at import."""

    def __init__(self, d=8, hidden=args.hidden):
        super().__init__()
        self.fc1 = nn.Linear(d, hidden)
        self.fc2 = nn.Linear(hidden, d)

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))

def get_inputs():
    return [torch.randn(4, 8)]

def get_init_inputs():
    return []
