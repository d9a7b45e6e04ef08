"""An LSTM whose initial states the forward draws with torch.randn (as KernelBench level 3's
35_LSTM): over a long sequence the last step forgets them, so the output does not depend on the draw."""
import torch
import torch.nn as nn

batch_size, seq_len, input_size, hidden_size, num_layers, output_size = 3, 24, 8, 16, 2, 5


class Model(nn.Module):
    def __init__(self, input_size, hidden_size, num_layers, output_size):
        super().__init__()
        self.hidden_size, self.num_layers = hidden_size, num_layers
        self.lstm = nn.LSTM(input_size, hidden_size, num_layers, batch_first=True)
        self.fc = nn.Linear(hidden_size, output_size)

    def forward(self, x, h0=None, c0=None):
        if h0 is None:
            h0 = torch.randn(self.num_layers, x.size(0), self.hidden_size, device=x.device)
        if c0 is None:
            c0 = torch.randn(self.num_layers, x.size(0), self.hidden_size, device=x.device)
        out, _ = self.lstm(x, (h0, c0))
        return self.fc(out[:, -1, :])


def get_inputs():
    return [torch.rand(batch_size, seq_len, input_size)]


def get_init_inputs():
    return [input_size, hidden_size, num_layers, output_size]
