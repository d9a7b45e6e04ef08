"""A multi-label tagger's head and its F.multilabel_margin_loss, each row's targets padded with
-1 (torch's own decomposition of the loss counts the padding as class 0)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, features: int = 12, classes: int = 6):
        super().__init__()
        self.head = nn.Linear(features, classes)

    def forward(self, x, target):
        scores = self.head(x)
        return scores, F.multilabel_margin_loss(scores, target, reduction="none")


def get_inputs():
    target = torch.randint(0, 6, (8, 6))
    target[:, 3] = -1
    return [torch.randn(8, 12), target]


def get_init_inputs():
    return [12, 6]
