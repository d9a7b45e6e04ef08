"""Level-3 style: EfficientNet-PyTorch's same-padding convolution, a torch layer subclass built through
functools.partial in set-up (`get_same_padding_conv2d(image_size)`)."""
import math
from functools import partial
import torch
import torch.nn as nn
import torch.nn.functional as F


class Conv2dStaticSamePadding(nn.Conv2d):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, image_size=None, **kwargs):
        super().__init__(in_channels, out_channels, kernel_size, stride, **kwargs)
        self.stride = self.stride if len(self.stride) == 2 else [self.stride[0]] * 2
        ih, iw = (image_size, image_size) if isinstance(image_size, int) else image_size
        kh, kw = self.weight.size()[-2:]
        sh, sw = self.stride
        oh, ow = math.ceil(ih / sh), math.ceil(iw / sw)
        pad_h = max((oh - 1) * self.stride[0] + (kh - 1) * self.dilation[0] + 1 - ih, 0)
        pad_w = max((ow - 1) * self.stride[1] + (kw - 1) * self.dilation[1] + 1 - iw, 0)
        if pad_h > 0 or pad_w > 0:
            self.static_padding = nn.ZeroPad2d((pad_w // 2, pad_w - pad_w // 2, pad_h // 2, pad_h - pad_h // 2))
        else:
            self.static_padding = nn.Identity()

    def forward(self, x):
        x = self.static_padding(x)
        x = F.conv2d(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)
        return x


def get_same_padding_conv2d(image_size=None):
    return partial(Conv2dStaticSamePadding, image_size=image_size)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        Conv2d = get_same_padding_conv2d(image_size=32)
        self._conv_stem = Conv2d(3, 8, kernel_size=3, stride=2, bias=False)
        self._bn0 = nn.BatchNorm2d(8, momentum=0.01, eps=1e-3)
        self._conv_head = Conv2d(8, 16, kernel_size=1, bias=False)

    def forward(self, x):
        x = F.silu(self._bn0(self._conv_stem(x)))
        return self._conv_head(x).mean(dim=(2, 3))


def get_inputs():
    return [torch.randn(2, 3, 32, 32)]


def get_init_inputs():
    return []
