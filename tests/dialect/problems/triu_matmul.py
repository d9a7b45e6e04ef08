"""Upper-triangular part of a 4096 x 4096 matmul: cuBLAS by default, a Triton template
under max-autotune (the gpu_triu_matmul_* captures were compiled from this shape)."""
import torch
import torch.nn as nn

N = 4096


class Model(nn.Module):
    def forward(self, A, B):
        return torch.triu(A @ B)


def get_inputs():
    return [torch.rand(N, N), torch.rand(N, N)]


def get_init_inputs():
    return []
