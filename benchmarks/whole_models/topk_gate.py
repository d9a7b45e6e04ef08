"""A gate's softmax scores, their top two values weighted by index (aten.topk)."""
import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate = nn.Linear(16, 8)
    def forward(self, x):
        scores = self.gate(x).softmax(-1)
        vals, idx = scores.topk(2, dim=-1)
        return vals * idx.float()
def get_inputs(): return [torch.randn(8, 16)]
def get_init_inputs(): return []
