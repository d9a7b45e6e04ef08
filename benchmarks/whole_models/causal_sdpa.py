"""A one-block causal language model: embedding, positions, LayerNorm, F.scaled_dot_product_attention(is_causal=True)."""
import torch, torch.nn as nn, torch.nn.functional as F
class Model(nn.Module):
    def __init__(self, v, d, h):
        super().__init__()
        self.emb = nn.Embedding(v, d); self.pos = nn.Parameter(torch.randn(1, 16, d) * 0.02)
        self.qkv = nn.Linear(d, 3 * d); self.h = h; self.ln = nn.LayerNorm(d); self.head = nn.Linear(d, v)
    def forward(self, idx):
        B, T = idx.shape
        x = self.emb(idx) + self.pos[:, :T]
        q, k, v = self.qkv(self.ln(x)).chunk(3, -1)
        q, k, v = (t.view(B, T, self.h, -1).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, -1)
        return self.head(x + y)
def get_inputs(): return [torch.randint(0, 40, (2, 12))]
def get_init_inputs(): return [40, 32, 4]
