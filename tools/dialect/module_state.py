"""What a module holds besides what torch.compile's graph reads as inputs: tensors that
are neither parameters nor buffers, Python numbers (tools/dialect/inductor_capture.py
follows both from call to call, or names why it cannot), and state no capture can hold.
"""
from __future__ import annotations


def plain_tensor_attributes(model) -> dict:
    """Tensors a module holds that are neither parameters nor buffers (`self.h0 =
    torch.randn(...)`), by dotted path: module.to() does not move them and state_dict does
    not hold them, but the forward reads them (and may overwrite them)."""
    import torch
    out = {}
    for prefix, module in model.named_modules():
        for name, value in vars(module).items():
            if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter):
                out[f"{prefix}.{name}" if prefix else name] = value
    return out


def scalar_attributes(model) -> dict:
    """The Python numbers, strings and booleans a module's submodules hold, by dotted path
    (a step counter the forward advances is state no captured graph carries)."""
    out = {}
    for prefix, module in model.named_modules():
        for name, value in vars(module).items():
            if isinstance(value, (bool, int, float, complex, str)):
                out[f"{prefix}.{name}" if prefix else name] = value
    return out


def check_capturable(model) -> None:
    """ValueError naming what no captured graph can follow, before compiling: a training
    BatchNorm with momentum=None updates its running statistics by a cumulative average,
    1 / num_batches_tracked read as a Python float, which Dynamo cannot trace (its error names
    a line of torch's batchnorm.py, not the model's)."""
    import torch
    for path, m in model.named_modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.training and m.track_running_stats \
                and m.momentum is None:
            raise ValueError(f"self.{path or 'model'} is a {type(m).__name__} with momentum=None, a cumulative "
                             "average of its running statistics (1 / num_batches_tracked, a Python float) that "
                             "torch.compile cannot capture; give it a momentum, or judge in eval mode "
                             "(--set eval.module_mode=eval)")
