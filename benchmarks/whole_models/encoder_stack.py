"""nn.TransformerEncoder of two norm-first GELU layers with a key padding mask (an input)."""
import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.0, batch_first=True, norm_first=True, activation="gelu")
        self.enc = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(16), enable_nested_tensor=False)
    def forward(self, x, mask):
        return self.enc(x, src_key_padding_mask=mask)
def get_inputs(): return [torch.randn(2, 5, 16), torch.tensor([[False]*4+[True], [False]*5])]
def get_init_inputs(): return []
