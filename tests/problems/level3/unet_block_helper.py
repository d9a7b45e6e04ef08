import torch
import torch.nn as nn

def block(i, o):
    return nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU(inplace=True),
                         nn.Conv2d(o, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU(inplace=True))

class Model(nn.Module):
    """A two-level U-Net whose blocks come from a top-level helper function (set-up code, not forward): encoder blocks with maxpool, bottleneck, ConvTranspose2d up, skip concatenation, 1x1 head."""
    def __init__(self, c=2, out=2):
        super().__init__()
        self.e1, self.e2, self.b = block(3, c), block(c, 2 * c), block(2 * c, 4 * c)
        self.u2, self.d2 = nn.ConvTranspose2d(4 * c, 2 * c, 2, 2), block(4 * c, 2 * c)
        self.u1, self.d1 = nn.ConvTranspose2d(2 * c, c, 2, 2), block(2 * c, c)
        self.head = nn.Conv2d(c, out, 1)
        self.pool = nn.MaxPool2d(2)

    def forward(self, x):
        e1 = self.e1(x); e2 = self.e2(self.pool(e1)); b = self.b(self.pool(e2))
        d2 = self.d2(torch.cat([self.u2(b), e2], 1))
        d1 = self.d1(torch.cat([self.u1(d2), e1], 1))
        return self.head(d1)

def get_inputs():
    return [torch.randn(1, 3, 8, 8)]

def get_init_inputs():
    return []
