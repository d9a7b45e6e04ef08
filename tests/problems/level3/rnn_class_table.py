"""A text encoder whose recurrent layer type is chosen from a table of classes by a constructor argument
('lstm' here); forward picks h_n out of the LSTM's (h_n, c_n) with an isinstance(self.rnn, nn.LSTM) check."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, cell="lstm", input_size=6, hidden_size=10):
        super().__init__()
        rnn_cls = {"lstm": nn.LSTM, "gru": nn.GRU, "rnn": nn.RNN}[cell]
        self.rnn = rnn_cls(input_size, hidden_size, num_layers=2, batch_first=True)
        self.fc = nn.Linear(hidden_size, 3)

    def forward(self, x):
        out, state = self.rnn(x)
        if isinstance(self.rnn, nn.LSTM):
            h_n = state[0]
        else:
            h_n = state
        return self.fc(h_n[-1])


def get_inputs():
    return [torch.randn(3, 5, 6)]


def get_init_inputs():
    return ["lstm", 6, 10]
