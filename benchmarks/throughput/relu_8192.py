"""Problem for the timing benchmarks (issue 9, P2): ReLU on 8192 x 8192 fp32.

One memory-bound kernel of 178 us or so on an H100 (512 MiB read and written,
well past the 50 MB L2), in the range where the per-call timer's in-region device sync
(~20 us) is a visible share and graph replay is the verdict's measure: its timed figure
is compared with Nsight Compute's kernel time (benchmarks/ncu_agreement.py)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs():
    return [torch.randn(8192, 8192)]


def get_init_inputs():
    return []
