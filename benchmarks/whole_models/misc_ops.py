"""A 0-dim parameter scaling a causally masked product, F.one_hot of int labels and torch.bucketize against a buffer."""
import torch, torch.nn as nn, torch.nn.functional as F
class Model(nn.Module):
    def __init__(self):
        super().__init__(); self.gamma = nn.Parameter(torch.tensor(0.5)); self.register_buffer("edges", torch.linspace(-2, 2, 9))
    def forward(self, x, labels):
        n = x.shape[1]
        causal = torch.ones(n, n, device=x.device).triu(1).bool()
        s = (x @ x.transpose(1, 2)).masked_fill(causal, 0.0)
        oh = F.one_hot(labels, 5).float()
        bins = torch.bucketize(x, self.edges)
        return self.gamma * s, oh, bins
def get_inputs(): return [torch.randn(2, 6, 4), torch.randint(0, 5, (7,))]
def get_init_inputs(): return []
