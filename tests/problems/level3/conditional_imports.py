"""Names a module file binds under a top-level try / if, as library code does: an optional
import with a fallback class, a flag, a layer chosen by what torch offers."""
import torch
import torch.nn as nn

try:
    from torch.nn import NoSuchNorm as Norm   # not in torch: the fallback below is what the module holds
    HAS_FUSED = True
except ImportError:
    HAS_FUSED = False

    class Norm(nn.Module):
        def __init__(self, d, eps=1e-5):
            super().__init__()
            self.ln = nn.LayerNorm(d, eps=eps)

        def forward(self, x):
            return self.ln(x)

if hasattr(nn, "GELU"):
    Act = nn.GELU
else:
    Act = nn.ReLU


class Model(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.norm = Norm(d)
        self.act = Act()
        self.fc = nn.Linear(d, d)
        self.scale = 2.0 if HAS_FUSED else 0.5

    def forward(self, x):
        return self.fc(self.act(self.norm(x))) * self.scale


def get_inputs():
    return [torch.randn(4, 16)]


def get_init_inputs():
    return [16]
