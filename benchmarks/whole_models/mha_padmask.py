"""nn.MultiheadAttention with a boolean key padding mask given as an input."""
import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.mha = nn.MultiheadAttention(32, 4, batch_first=True)
    def forward(self, x, pad):
        out, _ = self.mha(x, x, x, key_padding_mask=pad, need_weights=False)
        return out
def get_inputs(): return [torch.randn(2, 7, 32), torch.tensor([[False]*5+[True]*2, [False]*7])]
def get_init_inputs(): return []
