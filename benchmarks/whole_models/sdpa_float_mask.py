"""scaled_dot_product_attention with an additive float mask and unequal query/key lengths."""
import torch, torch.nn as nn, torch.nn.functional as F
class Model(nn.Module):
    def forward(self, q, k, v, bias): return F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
def get_inputs(): return [torch.randn(2, 4, 10, 16), torch.randn(2, 4, 12, 16), torch.randn(2, 4, 12, 16), torch.randn(10, 12)]
def get_init_inputs(): return []
