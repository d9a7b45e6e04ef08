"""The dialect room: KernelBook's dialect, the torch-2.5-era Inductor code KernelLLM writes.

portable.py rewrites such code as a standalone module (`portable`: inductor_grid.py's
launch grids and torch's triton_helpers defined in the file), the one form that is stored,
judged and delivered; runtime.py gives the worker libdevice for Triton's interpreter
(`install`, with interp_libdevice.py); causes.py names its usual faults in feedback (`explain`, placed among a
verdict's diagnostics by `with_causes`; names.py says where a missing name came from).
kernelbook.py rewrites torch.compile's output in the dialect (`convert`, with
inductor_wrapper.py reading Inductor's wrapper, kernelbook_model.py building ModelNew
and inductor_capture.py recording the compile), for the Inductor seed of a run;
`python -m tools.dialect seed PROBLEM --device D` (__main__.py) prints one; portfolio.py
keeps every configuration's seed (`portfolio_in_subprocess`).

This file only re-exports; modules under tools/ import the concrete submodules.
"""
from tools.dialect.causes import Shapes, explain, problem_shapes
from tools.dialect.inductor_capture import Capture, capture, capture_text, read_capture
from tools.dialect.kernelbook import HEADER, convert, seed_candidate
from tools.dialect.portfolio import PortfolioEntry, portfolio_in_subprocess, seed_portfolio
from tools.dialect.seedcache import seed_in_subprocess
from tools.dialect.runtime import install

__all__ = ["HEADER", "Capture", "PortfolioEntry", "Shapes", "capture", "capture_text", "convert", "explain",
           "install", "portfolio_in_subprocess", "problem_shapes", "read_capture", "seed_candidate",
           "seed_in_subprocess", "seed_portfolio"]
