"""An encoder LSTM whose final (h, c) starts a decoder LSTM: two recurrent ops, the state passed between them."""
import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.LSTM(5, 12, batch_first=True)
        self.dec = nn.LSTM(7, 12, batch_first=True)
        self.head = nn.Linear(12, 3)
    def forward(self, src, tgt):
        _, state = self.enc(src)
        out, _ = self.dec(tgt, state)
        return self.head(out)
def get_inputs(): return [torch.randn(2, 6, 5), torch.randn(2, 4, 7)]
def get_init_inputs(): return []
