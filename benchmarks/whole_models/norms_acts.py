"""PReLU, LayerNorm without affine, cosine similarity, normalize, vector_norm, SELU, log_softmax."""
import torch, torch.nn as nn, torch.nn.functional as F
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16); self.prelu = nn.PReLU(16); self.ln = nn.LayerNorm(16, elementwise_affine=False)
    def forward(self, x, y):
        a = self.ln(self.prelu(self.fc(x)))
        return F.cosine_similarity(a, y, dim=-1) + F.normalize(a, dim=-1).sum(-1) + torch.linalg.vector_norm(a, dim=-1) + F.selu(a).log_softmax(-1).mean(-1)
def get_inputs(): return [torch.randn(4, 16), torch.randn(4, 16)]
def get_init_inputs(): return []
