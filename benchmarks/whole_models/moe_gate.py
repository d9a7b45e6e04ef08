"""A mixture-of-experts gate: softmax, top-2, the experts gathered by index, einsum."""
import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self, d, e, k):
        super().__init__()
        self.gate = nn.Linear(d, e, bias=False); self.k = k
        self.experts = nn.Parameter(torch.randn(e, d, d) * 0.1)
    def forward(self, x):
        w, idx = self.gate(x).softmax(-1).topk(self.k, dim=-1)
        w = w / w.sum(-1, keepdim=True)
        chosen = self.experts[idx]                       # (B, k, d, d)
        y = torch.einsum("bkij,bj->bki", chosen, x)
        return (w.unsqueeze(-1) * y).sum(1)
def get_inputs(): return [torch.randn(6, 16)]
def get_init_inputs(): return [16, 4, 2]
