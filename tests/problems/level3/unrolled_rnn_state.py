"""An RNN unrolled by a Python loop over its time steps, its hidden state a plain tensor
attribute the forward reads and stores (KernelBench level 3's VanillaRNNHidden, with
state): a long graph of the forward's own ops, cut into blocks by op count."""
import torch
import torch.nn as nn

steps, batch_size, input_size, hidden_size, output_size = 10, 3, 5, 7, 4


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = torch.randn(batch_size, hidden_size)
        self.i2h = nn.Linear(input_size + hidden_size, hidden_size)
        self.h2o = nn.Linear(hidden_size, output_size)

    def forward(self, x):
        hidden = self.hidden.to(x.device)
        outputs = []
        for t in range(x.shape[0]):
            hidden = torch.tanh(self.i2h(torch.cat((x[t], hidden), dim=1)))
            outputs.append(self.h2o(hidden))
        self.hidden = hidden
        return torch.stack(outputs, dim=0)


def get_inputs():
    return [torch.randn(steps, batch_size, input_size)]


def get_init_inputs():
    return []
