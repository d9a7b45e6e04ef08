"""Cats that share prefixes: a feature pyramid reusing [a, b] twice, an in-place ReLU on a cat whose
inputs later cats repeat (the functional graph keeps the cat before the ReLU), and a cat growing along the last dim."""
import torch, torch.nn as nn, torch.nn.functional as F
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.c2, self.c3 = nn.Conv2d(4, 4, 3, padding=1), nn.Conv2d(4, 4, 1), nn.Conv2d(4, 4, 3, padding=1)
    def forward(self, x):
        a, b, c, d = x, self.c1(x), self.c2(x), self.c3(x)
        ab = torch.cat([a, b], 1)
        r = F.relu(ab, inplace=True)
        abc = torch.cat([a, b, c], 1)
        abd = torch.cat([a, b, d], 1)
        abcd = torch.cat([a, b, c, d], 1)
        seq = [x.mean(1)]
        outs = []
        for i in range(4):
            seq.append(seq[-1] * 0.5 + i)
            outs.append(torch.cat(seq, -1).sum(-1))
        return r, abc * 2, abd - 1, abcd.sum(1), torch.stack(outs)
def get_inputs(): return [torch.randn(2, 4, 6, 6)]
def get_init_inputs(): return []
