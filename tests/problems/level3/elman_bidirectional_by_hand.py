"""One Elman cell run over the sequence forward, then backward (`reversed(range(T))`), as a
bidirectional RNN written by hand: the forward steps are one chain, the backward ones count down."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, input_size=6, hidden_size=10):
        super().__init__()
        self.ih = nn.Linear(input_size, hidden_size)
        self.hh = nn.Linear(hidden_size, hidden_size, bias=False)

    def forward(self, x):
        T, B, _ = x.shape
        hf = x.new_zeros(B, self.hh.in_features)
        hb = x.new_zeros(B, self.hh.in_features)
        forward, backward = [], []
        for t in range(T):
            hf = torch.relu(self.ih(x[t]) + self.hh(hf))
            forward.append(hf)
        for t in reversed(range(T)):
            hb = torch.relu(self.hh(hb) + self.ih(x[t]))
            backward.append(hb)
        return torch.cat([torch.stack(forward), torch.stack(backward[::-1])], dim=2)


def get_inputs():
    return [torch.randn(7, 2, 6)]


def get_init_inputs():
    return []
