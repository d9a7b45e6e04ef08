"""A warm-up counter kept as a class attribute (`type(self).step += 1`): Python state no graph
carries. Before, the capture looked only at instances' attributes, and the seed held the weight 0."""
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    step = 0
    warmup = 4

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 3)

    def forward(self, x, y):
        type(self).step += 1
        out = self.fc(x)
        return F.cross_entropy(out, y) * min(1.0, self.step / self.warmup), out


def get_inputs():
    import torch
    return [torch.randn(4, 8), torch.randint(0, 3, (4,))]


def get_init_inputs():
    return []
