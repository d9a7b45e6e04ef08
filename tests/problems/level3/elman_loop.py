import torch
import torch.nn as nn


class Model(nn.Module):
    """A vanilla RNN written by hand (KernelBench level 3's 34_VanillaRNNHidden, small): one Linear
    on the concatenated input and hidden state per step, tanh, and an output projection per step."""

    def __init__(self, input_size, hidden_size, output_size):
        super().__init__()
        self.i2h = nn.Linear(input_size + hidden_size, hidden_size)
        self.h2o = nn.Linear(hidden_size, output_size)
        self.tanh = nn.Tanh()

    def forward(self, x, h0):
        hidden = h0.to(x.device)
        outputs = []
        for t in range(x.size(0)):
            hidden = self.tanh(self.i2h(torch.cat((x[t], hidden), dim=1)))
            outputs.append(self.h2o(hidden))
        return torch.stack(outputs, dim=0)


def get_inputs():
    return [torch.rand(7, 3, 5), torch.rand(3, 6)]


def get_init_inputs():
    return [5, 6, 4]
