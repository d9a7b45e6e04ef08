"""An RNN cell whose hidden state is a plain tensor attribute (not a buffer), moved to the
input's device in forward and overwritten each call, as KernelBench level 3's RNN cells."""
import torch
import torch.nn as nn

batch_size = 4
input_size = 8
hidden_size = 16
output_size = 6


class Model(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super(Model, self).__init__()
        self.hidden_size = hidden_size
        self.hidden = torch.randn((batch_size, hidden_size))
        self.i2h = nn.Linear(input_size + hidden_size, hidden_size)
        self.h2o = nn.Linear(hidden_size, output_size)
        self.tanh = nn.Tanh()

    def forward(self, x):
        self.hidden = self.hidden.to(x.device)
        combined = torch.cat((x, self.hidden), dim=1)
        self.hidden = self.tanh(self.i2h(combined))
        output = self.h2o(self.hidden)
        return output


def get_inputs():
    return [torch.randn(batch_size, input_size)]


def get_init_inputs():
    return [input_size, hidden_size, output_size]
