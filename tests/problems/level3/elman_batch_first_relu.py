import torch
import torch.nn as nn


class Model(nn.Module):
    """A hand-written relu RNN over a batch-first sequence from its second step on, the hidden state
    first in the cat, no initial state given: every hidden state and the last one returned."""

    def __init__(self, input_size=5, hidden_size=6):
        super().__init__()
        self.cell = nn.Linear(hidden_size + input_size, hidden_size)
        self.hidden_size = hidden_size

    def forward(self, x):
        h = x.new_zeros(x.shape[0], self.hidden_size)
        states = []
        for t in range(1, x.shape[1]):
            h = torch.relu(self.cell(torch.cat([h, x[:, t]], dim=-1)))
            states.append(h)
        return torch.stack(states, dim=1), h


def get_inputs():
    return [torch.randn(3, 8, 5)]


def get_init_inputs():
    return []
