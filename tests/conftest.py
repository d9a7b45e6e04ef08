"""Shared pytest set-up: GPU tests skip cleanly on machines without a CUDA device."""
from __future__ import annotations

import pytest


def _has_cuda() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except Exception:
        return False


HAS_CUDA = _has_cuda()


def pytest_collection_modifyitems(config, items):
    if HAS_CUDA:
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU and a CUDA build of torch")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
