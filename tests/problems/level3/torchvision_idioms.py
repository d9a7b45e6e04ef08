"""Level-3 style: a small network written the torchvision / timm way: a ConvBNReLU that
subclasses nn.Sequential with a norm_layer chosen when none is given, a channels-first
LayerNorm subclassing nn.LayerNorm with a forward of its own, a top-level conv3x3
factory, functools.partial of a BatchNorm, a functional activation kept on the module,
and weights initialised by `self.apply(...)` and a loop over `self.modules()`."""
import functools

import torch
import torch.nn as nn
import torch.nn.functional as F


def conv3x3(cin, cout, stride=1):
    return nn.Conv2d(cin, cout, 3, stride, 1, bias=False)


class ConvBNReLU(nn.Sequential):
    def __init__(self, cin, cout, k=3, stride=1, groups=1, norm_layer=None):
        if norm_layer is None:
            norm_layer = nn.BatchNorm2d
        super().__init__(nn.Conv2d(cin, cout, k, stride, (k - 1) // 2, groups=groups, bias=False),
                         norm_layer(cout), nn.ReLU6(inplace=True))


class LayerNorm2d(nn.LayerNorm):
    def forward(self, x):
        return F.layer_norm(x.permute(0, 2, 3, 1), self.normalized_shape, self.weight, self.bias,
                            self.eps).permute(0, 3, 1, 2)


class Model(nn.Module):
    def __init__(self, c: int, classes: int):
        super().__init__()
        norm = functools.partial(nn.BatchNorm2d, eps=1e-3, momentum=0.01)
        self.stem = ConvBNReLU(3, c, stride=2, norm_layer=norm)
        self.dw = ConvBNReLU(c, c, groups=c)
        self.conv = conv3x3(c, c)
        self.norm = LayerNorm2d(c)
        self.act = F.relu
        self.head = nn.Linear(c, classes)
        self.apply(self._init_weights)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out")

    def _init_weights(self, m):
        if isinstance(m, nn.Linear):
            nn.init.trunc_normal_(m.weight, std=0.02)
            nn.init.zeros_(m.bias)

    def forward(self, x):
        x = self.act(self.norm(self.conv(self.dw(self.stem(x)))))
        return self.head(x.mean((2, 3)))


def get_inputs():
    return [torch.randn(2, 3, 16, 16)]


def get_init_inputs():
    return [8, 5]
