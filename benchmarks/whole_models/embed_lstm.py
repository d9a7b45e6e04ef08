"""Embedding, an LSTM, a linear head on the last step."""
import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self, v, d):
        super().__init__()
        self.emb = nn.Embedding(v, d)
        self.lstm = nn.LSTM(d, d, num_layers=1, batch_first=True)
        self.fc = nn.Linear(d, v)
    def forward(self, idx):
        out, _ = self.lstm(self.emb(idx))
        return self.fc(out[:, -1])
def get_inputs(): return [torch.randint(0, 50, (4, 12))]
def get_init_inputs(): return [50, 16]
